// The bounded step barrier of ops/shm/shm_sync.h.
#include "ops/shm/shm_sync.h"

#include "core/liveness.h"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KOLO_CPU_RELAX() _mm_pause()
#else
#define KOLO_CPU_RELAX() std::atomic_signal_fence(std::memory_order_seq_cst)
#endif

namespace kolo::shm {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kAbortWriting = 1;
constexpr uint64_t kAbortReady = 2;
constexpr uint64_t kAbortReadyVerbatim = 3;  // the message is the whole error (a dead peer)
// How long a wait yields before it starts sleeping, how long it sleeps, and how often it
// checks that the peer still exists.
constexpr auto kYieldPhase = std::chrono::milliseconds(2);
constexpr auto kSleep = std::chrono::microseconds(50);
constexpr auto kProbeEvery = std::chrono::milliseconds(10);
// The longest one futex sleep lasts: how late a rank sees an abort or a peer that left.
constexpr auto kFutexNap = std::chrono::milliseconds(1);

int online_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

// The 32 bits of a step word that change with every step: the futex word.
uint32_t* futex_word(std::atomic<uint64_t>& w) {
  static_assert(sizeof(std::atomic<uint64_t>) == 8, "a step word is 8 bytes");
  auto* halves = reinterpret_cast<uint32_t*>(&w);
  return __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? halves : halves + 1;
}

// Not FUTEX_PRIVATE: the word is in memory shared between processes.
void futex_sleep(uint32_t* word, uint32_t seen, std::chrono::nanoseconds most) {
  const timespec t{0, static_cast<long>(most.count())};
  syscall(SYS_futex, word, FUTEX_WAIT, seen, &t, nullptr, 0);
}

void futex_wake_all(uint32_t* word) { syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0); }

}  // namespace

size_t control_bytes(int local_size) {
  const size_t raw = sizeof(ControlHeader) + sizeof(RankLine) * static_cast<size_t>(local_size);
  return (raw + 4095) / 4096 * 4096;
}

PeerSync::PeerSync(void* segment, int local_rank, int local_size,
                   std::chrono::milliseconds timeout)
    : header_(static_cast<ControlHeader*>(segment)),
      lines_(reinterpret_cast<RankLine*>(static_cast<char*>(segment) + sizeof(ControlHeader))),
      rank_(local_rank),
      size_(local_size),
      timeout_(timeout),
      // With a CPU each, a peer arrives within microseconds and spinning wins; with more
      // ranks than CPUs the peer we wait for may need our CPU, so give it up almost at once.
      spin_(local_size <= online_cpus() ? 4000 : 20) {
  step_ = lines_[rank_].arrived.load(std::memory_order_relaxed);
  all_seen_ = step_;
}

Status PeerSync::arrive(uint64_t e, const CallDesc& desc) {
  KOLO_RETURN_IF_ERROR(prepare(e));
  RankLine& me = lines_[rank_];
  me.desc[e % 2] = desc;
  // seq_cst store, then the load: a peer that counted itself asleep before this store is
  // seen here, and one that counts itself after it sees e (wait_slow) -- none sleeps on.
  me.arrived.store(e, std::memory_order_seq_cst);
  if (me.sleepers.load(std::memory_order_seq_cst) != 0) futex_wake_all(futex_word(me.arrived));
  return Status::ok();
}

Status PeerSync::wait_for(int peer, uint64_t e) {
  if (lines_[peer].arrived.load(std::memory_order_acquire) >= e) return Status::ok();
  return wait_slow(peer, e);
}

Status PeerSync::wait_all(uint64_t e, bool check, bool* placement_differs) {
  for (int j = 0; j < size_; ++j) {
    if (j == rank_) continue;
    KOLO_RETURN_IF_ERROR(wait_for(j, e));
  }
  all_seen_ = std::max(all_seen_, e);
  if (!check) return Status::ok();
  const CallDesc& mine = lines_[rank_].desc[e % 2];
  for (int j = 0; j < size_; ++j) {
    const CallDesc& theirs = lines_[j].desc[e % 2];
    if (j == rank_ || theirs.same_call(mine)) continue;
    const auto text = [&](const CallDesc& d) {
      return describe_ != nullptr ? describe_(d) : std::to_string(d.what) + "/" + std::to_string(d.size);
    };
    return fail(Status::mismatch("shared memory: local rank " + std::to_string(rank_) +
                                 " called " + text(mine) + " but local rank " + std::to_string(j) +
                                 " called " + text(theirs)));
  }
  // Only once no rank called something else (which every rank sees alike), the placements.
  for (int j = 0; j < size_; ++j) {
    if (lines_[j].desc[e % 2].placement != mine.placement && placement_differs != nullptr) {
      *placement_differs = true;
    }
  }
  return Status::ok();
}

Status PeerSync::wait_slow(int peer, uint64_t e) {
  const std::atomic<uint64_t>& arrived = lines_[peer].arrived;
  for (int i = 0; i < spin_; ++i) {
    if (arrived.load(std::memory_order_acquire) >= e) return Status::ok();
    KOLO_CPU_RELAX();
  }
  const Clock::time_point start = Clock::now();
  Clock::time_point next_probe = start + kProbeEvery;
  for (;;) {
    if (arrived.load(std::memory_order_acquire) >= e) return Status::ok();
    if (header_->abort_word.load(std::memory_order_acquire) != 0) return published_failure();
    if (idle_ != nullptr) {
      Status s = idle_();
      if (!s.is_ok()) return fail(std::move(s), true);
    }
    const Clock::time_point now = Clock::now();
    if (now - start < kYieldPhase) {
      sched_yield();
    } else if (idle_ == nullptr) {
      // A long wait (the peer computes, or waits for the CPU): sleep until it arrives, at
      // most kFutexNap, counted in its line so that its arrive() wakes us at once.
      std::atomic<uint64_t>& word = lines_[peer].arrived;
      const uint64_t seen = word.load(std::memory_order_seq_cst);
      lines_[peer].sleepers.fetch_add(1, std::memory_order_seq_cst);
      if (word.load(std::memory_order_seq_cst) == seen && seen < e) {
        futex_sleep(futex_word(word), static_cast<uint32_t>(seen), kFutexNap);
      }
      lines_[peer].sleepers.fetch_sub(1, std::memory_order_relaxed);
    } else {
      // Polling `idle_` (the transfers between hosts) must go on: short sleeps.
      std::this_thread::sleep_for(kSleep);
    }
    if (now >= next_probe || now - start >= timeout_) {
      next_probe = now + kProbeEvery;
      Status s = peer_gone_or_late(peer, e, start, now);
      if (!s.is_ok()) return s;
    }
  }
}

Status PeerSync::peer_gone_or_late(int peer, uint64_t e, Clock::time_point start,
                                   Clock::time_point now) {
  if (lines_[peer].arrived.load(std::memory_order_acquire) >= e) return Status::ok();
  if (watch_ != nullptr) {
    // The job's view first: a dead rank anywhere (this host by pid, another by heartbeat).
    Status s = watch_();
    if (!s.is_ok()) return fail(std::move(s), true);
  }
  const int pid = lines_[peer].pid.load(std::memory_order_relaxed);
  if (lines_[peer].left.load(std::memory_order_acquire) != 0) {
    return fail(Status::aborted("shared memory: local rank " + std::to_string(peer) +
                                " shut its group down while local rank " + std::to_string(rank_) +
                                " waited for it at step " + std::to_string(e) +
                                " (ranks made different numbers of collective calls?)"));
  }
  if (liveness_ && !process_alive(pid)) {
    return fail(Status::aborted("shared memory: local rank " + std::to_string(peer) + " (pid " +
                                std::to_string(pid) + ") exited during a collective; local rank " +
                                std::to_string(rank_) + " was waiting for it at step " +
                                std::to_string(e)));
  }
  if (now - start >= timeout_) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count();
    return fail(Status::timeout("shared memory: local rank " + std::to_string(peer) + " (pid " +
                                std::to_string(pid) + ") did not arrive at step " +
                                std::to_string(e) + " within " + std::to_string(ms) +
                                " ms; local rank " + std::to_string(rank_) + " gave up"));
  }
  return Status::ok();
}

void PeerSync::check_peers_visible() {
  for (int j = 0; j < size_; ++j) {
    if (j != rank_ && !process_alive(lines_[j].pid.load(std::memory_order_relaxed))) liveness_ = false;
  }
}

Status PeerSync::fail(Status s, bool verbatim) {
  uint64_t expected = 0;
  const uint64_t mine = static_cast<uint64_t>(rank_ + 1);
  if (header_->abort_word.compare_exchange_strong(expected, mine | (kAbortWriting << 32),
                                                  std::memory_order_acq_rel)) {
    const std::string text = verbatim ? s.message() : s.to_string();
    const size_t n = std::min(text.size(), sizeof(header_->abort_message) - 1);
    std::memcpy(header_->abort_message, text.data(), n);
    header_->abort_message[n] = '\0';
    header_->abort_word.store(mine | ((verbatim ? kAbortReadyVerbatim : kAbortReady) << 32),
                              std::memory_order_release);
  }
  return s;
}

bool PeerSync::is_job_verdict(const Status& s) const {
  if (s.is_ok() || watch_ == nullptr) return false;
  const Status w = watch_();
  return !w.is_ok() && w.message() == s.message();
}

Status PeerSync::published_failure() const {
  uint64_t w = header_->abort_word.load(std::memory_order_acquire);
  if (w == 0) return Status::ok();
  // The failing rank writes its message right after claiming the word; give it a moment (it
  // may be descheduled), so that every rank reports the cause, not just who stopped.
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(1);
  while ((w >> 32) != kAbortReady && (w >> 32) != kAbortReadyVerbatim && Clock::now() < give_up) {
    sched_yield();
    w = header_->abort_word.load(std::memory_order_acquire);
  }
  if ((w >> 32) == kAbortReadyVerbatim) return Status::aborted(header_->abort_message);
  const int who = static_cast<int>(w & 0xffffffffu) - 1;
  std::string why = "(no message)";
  if ((w >> 32) == kAbortReady) why = header_->abort_message;
  return Status::aborted("shared memory: local rank " + std::to_string(who) +
                         " stopped the group: " + why);
}

}  // namespace kolo::shm

// The coordinator loop's idle policy: what the loop thread does between passes when it has
// nothing to run (core/coordinator.h, "The idle policy"; docs/runtime.md, "The waiter runs
// the pass"). help() itself, which runs passes on a waiting thread, is in
// core/coordinator_help.cc.
#include <algorithm>
#include <thread>

#include "core/coordinator.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;

constexpr auto kMinSleep = microseconds(20);
// While a waiting thread runs the passes (core/wait_help.h), the loop sleeps this long at a
// time unless woken: the longest a push made right after a helper left, with no helper
// since, waits for the loop.
constexpr auto kHelperNap = std::chrono::milliseconds(1);

// A single rank sleeps until its queue wakes it; this bounds only how late a signal kolo
// intercepted is acted on.
constexpr auto kSingleRankSleep = std::chrono::milliseconds(50);

// Within the spin window, how long one pass watches the queue and the board before it
// yields the core.
constexpr auto kPollBurst = microseconds(2);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int64_t steady_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

bool Coordinator::nap_for_helpers() {
  if (helpers_.load() > 0) {
    // A waiting thread runs the passes (core/wait_help.h): keep off the cores.
    // Napping, not polling: a thread that wakes often preempts the helper it makes room
    // for (a 20 us nap put a 35-40 us tail on every tenth 4 KB allreduce). A helper that
    // leaves work behind wakes the nap (help()).
    std::unique_lock<std::mutex> nap(nap_mu_);
    nap_cv_.wait_for(nap, kHelperNap, [&] { return nap_wake_; });
    nap_wake_ = false;
    return true;
  }
  if (defer_burst()) {
    // Napping as for a helper: a helper that leaves work behind ends the nap (help()).
    std::unique_lock<std::mutex> nap(nap_mu_);
    nap_cv_.wait_for(nap, microseconds(config_.burst_hold_us), [&] { return nap_wake_; });
    nap_wake_ = false;
    return true;
  }
  return false;
}

void Coordinator::idle_wait() {
  const auto idle = Clock::now() - Clock::time_point(std::chrono::nanoseconds(last_activity_ns_.load()));
  if (topo_.size == 1) {
    // No peer can send anything: only this rank's own requests (which wake the queue) or a
    // shutdown (which notifies it) give work, so there is nothing to spin or poll for.
    queue_.wait_for_work(kSingleRankSleep);
  } else if (helped_last_.load(std::memory_order_relaxed)) {
    // Waiting threads ran the latest work (core/wait_help.h) and will run the next: a
    // thread that polls or wakes often here takes the core of an engine thread in the
    // middle of its collective (docs/benchmarks.md, "A blocking call does not wake the
    // coordinator"). Sleep until a push that no waiter takes, or a helper that leaves work.
    queue_.wait_for_work(microseconds(max_sleep_us_.load(std::memory_order_relaxed)));
  } else if (idle < kSpinWindow) {
    // A small collective's whole life on one host is a few microseconds.
    poll_then_yield(nullptr);
  } else {
    const auto max_sleep = microseconds(max_sleep_us_.load(std::memory_order_relaxed));
    auto sleep = std::clamp(std::chrono::duration_cast<microseconds>(idle / 4), std::min(kMinSleep, max_sleep),
                            max_sleep);
    queue_.wait_for_work(sleep);
  }
}

bool Coordinator::defer_burst() {
  if (!helps_ || !config_.burst_defer || config_.burst_hold_us == 0 || !queue_.maybe_work()) {
    defer_since_ns_ = 0;
    return false;
  }
  const int64_t now = steady_ns(Clock::now());
  const int64_t gap = int64_t{config_.burst_hold_us} * 1000;
  if (defer_since_ns_ == 0) defer_since_ns_ = now;
  if (now - queue_.last_push_ns() >= gap || now - defer_since_ns_ >= kDeferBursts * gap) {
    defer_since_ns_ = 0;
    return false;
  }
  return true;
}

// Watches the two signals that cost no syscall (this rank's queue, a peer's round on the
// board) and `done` for a moment, then gives the core away.
void Coordinator::poll_then_yield(const std::atomic<bool>* done) {
  const auto quiet = [&] {
    return !queue_.maybe_work() && !fast_.needs_attention() &&
           !(done && done->load(std::memory_order_relaxed));
  };
  if (!crowded_) {
    const auto until = Clock::now() + kPollBurst;
    while (quiet() && Clock::now() < until) cpu_relax();
  }
  if (quiet()) std::this_thread::yield();
}

void Coordinator::wake_nap() {
  {
    std::lock_guard<std::mutex> lock(nap_mu_);
    nap_wake_ = true;
  }
  nap_cv_.notify_one();
  // The loop may be asleep on the queue instead (after helped passes, or idle).
  queue_.notify();
}

}  // namespace kolo

// The coordinator's idle policy and the waiters' share of the passes (core/idle_policy.h;
// docs/runtime.md, "The waiter runs the pass").
#include "core/idle_policy.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "core/host_info.h"

namespace kolo {
namespace {

using Clock = IdlePolicy::Clock;
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

// What a bounded helper leaves before its deadline at the least: an idle pass's few
// microseconds, with room for the thread to be descheduled once.
constexpr std::chrono::nanoseconds kMinPass = std::chrono::microseconds(50);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int64_t steady_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

IdlePolicy::IdlePolicy(const Config& config, TensorQueue& queue, const FastPath& fast, int size, int local_size,
                       bool helps)
    : queue_(queue),
      fast_(fast),
      helps_(helps),
      single_rank_(size == 1),
      crowded_(local_size > cpus_for_ranks()),
      burst_defer_(config.burst_defer),
      burst_hold_us_(config.burst_hold_us),
      max_sleep_us_(static_cast<int64_t>(config.cycle_time_ms * 1000.0)),
      last_activity_ns_(steady_ns(Clock::now())) {
  queue_.note_push_times(helps_ && burst_defer_ && burst_hold_us_ > 0);  // defer_burst's
}

void IdlePolicy::nap(microseconds timeout) {
  std::unique_lock<std::mutex> lock(nap_mu_);
  nap_cv_.wait_for(lock, timeout, [&] { return nap_wake_; });
  nap_wake_ = false;
}

bool IdlePolicy::nap_for_helpers() {
  if (helpers_.load() > 0) {
    // A waiting thread runs the passes (core/wait_help.h): keep off the cores.
    // Napping, not polling: a thread that wakes often preempts the helper it makes room
    // for (a 20 us nap put a 35-40 us tail on every tenth 4 KB allreduce). A helper that
    // leaves work behind wakes the nap (helper_leaves).
    nap(kHelperNap);
    return true;
  }
  if (defer_burst()) {
    // Napping as for a helper: a helper that leaves work behind ends the nap.
    nap(microseconds(burst_hold_us_));
    return true;
  }
  return false;
}

void IdlePolicy::idle_wait() {
  const auto idle = Clock::now() - Clock::time_point(std::chrono::nanoseconds(last_activity_ns_.load()));
  if (single_rank_) {
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

bool IdlePolicy::defer_burst() {
  if (!helps_ || !burst_defer_ || burst_hold_us_ == 0 || !queue_.maybe_work()) {
    defer_since_ns_ = 0;
    return false;
  }
  const int64_t now = steady_ns(Clock::now());
  const int64_t gap = int64_t{burst_hold_us_} * 1000;
  if (defer_since_ns_ == 0) defer_since_ns_ = now;
  if (now - queue_.last_push_ns() >= gap || now - defer_since_ns_ >= kDeferBursts * gap) {
    defer_since_ns_ = 0;
    return false;
  }
  return true;
}

// Watches the two signals that cost no syscall (this rank's queue, a peer's round on the
// board) and `done` for a moment, then gives the core away.
void IdlePolicy::poll_then_yield(const std::atomic<bool>* done) {
  const auto quiet = [&] {
    return !queue_.maybe_work() && !fast_.needs_attention() && !(done && done->load(std::memory_order_relaxed));
  };
  if (!crowded_) {
    const auto until = Clock::now() + kPollBurst;
    while (quiet() && Clock::now() < until) cpu_relax();
  }
  if (quiet()) std::this_thread::yield();
}

void IdlePolicy::wake_nap() {
  {
    std::lock_guard<std::mutex> lock(nap_mu_);
    nap_wake_ = true;
  }
  nap_cv_.notify_one();
  // The loop may be asleep on the queue instead (after helped passes, or idle).
  queue_.notify();
}

void IdlePolicy::note_activity(Clock::time_point end, std::chrono::nanoseconds took) {
  const int64_t now_ns = steady_ns(end);
  last_activity_ns_.store(now_ns, std::memory_order_relaxed);
  const int64_t held = long_pass_ns_.load(std::memory_order_relaxed);
  const double age_s = static_cast<double>(now_ns - long_pass_at_ns_.load(std::memory_order_relaxed)) * 1e-9;
  if (static_cast<double>(took.count()) < static_cast<double>(held) * std::exp2(-std::max(age_s, 0.0))) return;
  long_pass_ns_.store(took.count(), std::memory_order_relaxed);
  long_pass_at_ns_.store(now_ns, std::memory_order_relaxed);
}

std::chrono::nanoseconds IdlePolicy::expected_pass(int64_t now_ns) const {
  const int64_t held = long_pass_ns_.load(std::memory_order_relaxed);
  const double age_s = static_cast<double>(now_ns - long_pass_at_ns_.load(std::memory_order_relaxed)) * 1e-9;
  const auto decayed = static_cast<int64_t>(static_cast<double>(held) * std::exp2(-std::max(age_s, 0.0)));
  return std::max(kMinPass, std::chrono::nanoseconds(decayed));
}

bool IdlePolicy::pass_fits(Clock::time_point now, Clock::time_point deadline) const {
  // A pass cannot be left halfway, so a bounded helper starts one only where the longest
  // recent one would end before the deadline (and never holds the engine past it).
  return deadline - now >= expected_pass(steady_ns(now));
}

void IdlePolicy::helper_leaves(bool left_work) {
  helpers_.fetch_sub(1);
  // Work left behind (the helper's handle, or others this rank submitted) is the loop's
  // again: end its nap now rather than at kHelperNap, and it polls again as after its own
  // passes (a peer it waits for may come within microseconds).
  if (left_work) {
    helped_last_.store(false, std::memory_order_relaxed);
    wake_nap();
  }
}

}  // namespace kolo

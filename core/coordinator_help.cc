// Coordinator::help (a thread waiting on a handle runs the passes: core/wait_help.h). The
// short poll it shares with the idle loop, and the loop's nap: core/coordinator_idle.cc.
#include <algorithm>
#include <cmath>
#include <thread>

#include "core/coordinator.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;

int64_t steady_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// What a bounded helper leaves before its deadline at the least: an idle pass's few
// microseconds, with room for the thread to be descheduled once.
constexpr std::chrono::nanoseconds kMinPass = std::chrono::microseconds(50);

}  // namespace

void Coordinator::note_pass(int64_t now_ns, int64_t took_ns) {
  const int64_t held = long_pass_ns_.load(std::memory_order_relaxed);
  const double age_s = static_cast<double>(now_ns - long_pass_at_ns_.load(std::memory_order_relaxed)) * 1e-9;
  if (static_cast<double>(took_ns) < static_cast<double>(held) * std::exp2(-std::max(age_s, 0.0))) return;
  long_pass_ns_.store(took_ns, std::memory_order_relaxed);
  long_pass_at_ns_.store(now_ns, std::memory_order_relaxed);
}

std::chrono::nanoseconds Coordinator::expected_pass(int64_t now_ns) const {
  const int64_t held = long_pass_ns_.load(std::memory_order_relaxed);
  const double age_s = static_cast<double>(now_ns - long_pass_at_ns_.load(std::memory_order_relaxed)) * 1e-9;
  const auto decayed = static_cast<int64_t>(static_cast<double>(held) * std::exp2(-std::max(age_s, 0.0)));
  return std::max(kMinPass, std::chrono::nanoseconds(decayed));
}

void Coordinator::help(const std::atomic<bool>& done, Clock::time_point deadline) {
  if (!helps_) return;
  const bool bounded = deadline != Clock::time_point::max();
  helpers_.fetch_add(1);
  // `now`: the clock as of the last look, read after a yield and taken from the pass's own
  // reading of its end otherwise (pass_end_), so that a pass costs two readings in all.
  auto now = Clock::now();
  auto last = now;
  while (!done.load(std::memory_order_acquire) && running_.load()) {
    // Handle::wait_for: a pass cannot be left halfway, so start one only where the longest
    // recent one would end before the deadline (and never hold the engine past it).
    if (bounded && deadline - now < expected_pass(steady_ns(now))) break;
    std::unique_lock<std::mutex> lock(engine_mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      // The loop (or another waiter) is inside a pass; the loop naps once it sees us. A long
      // pass (a large collective) is not ours to wait out spinning: sleep on the handle.
      if (now - last > kSpinWindow) break;
      std::this_thread::yield();
      now = Clock::now();
      continue;
    }
    bool activity = false;
    const bool on = pass(&activity);
    now = pass_end_;  // under the lock: the next pass (any thread's) writes it
    lock.unlock();
    if (!on) break;
    if (activity) {
      helped_passes_.fetch_add(1, std::memory_order_relaxed);
      helped_last_.store(true, std::memory_order_relaxed);
      last = now;
      continue;
    }
    if (now - last > kSpinWindow) break;
    poll_then_yield(&done);
    now = Clock::now();
  }
  helpers_.fetch_sub(1);
  // Work left behind (this handle, or others this rank submitted) is the loop's again: end
  // its nap now rather than at kHelperNap (core/coordinator_idle.cc), and it polls again as after
  // its own passes (a peer it waits for may come within microseconds).
  if (!done.load(std::memory_order_acquire) || queue_.has_pending()) {
    helped_last_.store(false, std::memory_order_relaxed);
    wake_nap();
  }
}

}  // namespace kolo

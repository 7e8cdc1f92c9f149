// Coordinator::help: a thread waiting on a handle runs the passes (core/wait_help.h). The
// score it keeps with the loop (who ran last, how long a pass takes, the loop's nap):
// core/idle_policy.h.
#include <thread>

#include "core/coordinator.h"

namespace kolo {

void Coordinator::help(const std::atomic<bool>& done, std::chrono::steady_clock::time_point deadline) {
  using Clock = std::chrono::steady_clock;
  if (!idle_.helps()) return;
  const bool bounded = deadline != Clock::time_point::max();
  idle_.helper_enters();
  // `now`: the clock as of the last look, read after a yield and taken from the pass's own
  // reading of its end otherwise (pass_end_), so that a pass costs two readings in all.
  auto now = Clock::now();
  auto last = now;
  while (!done.load(std::memory_order_acquire) && running_.load()) {
    // Handle::wait_for: start a pass only where the longest recent one ends before the deadline.
    if (bounded && !idle_.pass_fits(now, deadline)) break;
    std::unique_lock<std::mutex> lock(idle_.engine(), std::try_to_lock);
    if (!lock.owns_lock()) {
      // The loop (or another waiter) is inside a pass; the loop naps once it sees us. A long
      // pass (a large collective) is not ours to wait out spinning: sleep on the handle.
      if (now - last > IdlePolicy::kSpinWindow) break;
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
      idle_.note_helped_pass();
      last = now;
      continue;
    }
    if (now - last > IdlePolicy::kSpinWindow) break;
    idle_.poll_then_yield(&done);
    now = Clock::now();
  }
  // Work left behind (this handle, or others this rank submitted) is the loop's again.
  idle_.helper_leaves(!done.load(std::memory_order_acquire) || queue_.has_pending());
}

}  // namespace kolo

// Coordinator::help (a thread waiting on a handle runs the passes: core/wait_help.h) and
// the short poll it shares with the idle loop; the loop's nap is in core/coordinator.cc.
#include <thread>

#include "core/coordinator.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;

// Within the spin window, how long one pass watches the queue and the board before it
// yields the core.
constexpr auto kPollBurst = std::chrono::microseconds(2);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

// Watches the two signals that cost no syscall (this rank's queue, a peer's round on the
// board) and `done` for a moment, then gives the core away.
void Coordinator::poll_then_yield(const std::atomic<bool>* done) {
  const auto until = Clock::now() + kPollBurst;
  const auto quiet = [&] {
    return !queue_.maybe_work() && !(board_ && board_->needs_attention()) &&
           !(done && done->load(std::memory_order_relaxed));
  };
  while (quiet() && Clock::now() < until) cpu_relax();
  if (quiet()) std::this_thread::yield();
}

void Coordinator::help(const std::atomic<bool>& done) {
  if (!helps_) return;
  helpers_.fetch_add(1);
  auto last = Clock::now();
  while (!done.load(std::memory_order_acquire) && running_.load()) {
    std::unique_lock<std::mutex> lock(engine_mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      // The loop (or another waiter) is inside a pass; the loop naps once it sees us. A long
      // pass (a large collective) is not ours to wait out spinning: sleep on the handle.
      if (Clock::now() - last > kSpinWindow) break;
      std::this_thread::yield();
      continue;
    }
    bool activity = false;
    const bool on = pass(&activity);
    lock.unlock();
    if (!on) break;
    const auto now = Clock::now();
    if (activity) {
      helped_passes_.fetch_add(1, std::memory_order_relaxed);
      last = now;
      continue;
    }
    if (now - last > kSpinWindow) break;
    poll_then_yield(&done);
  }
  helpers_.fetch_sub(1);
  // Work left behind (this handle, or others this rank submitted) is the loop's again: end
  // its nap now rather than at kHelperNap (core/coordinator.cc).
  if (!done.load(std::memory_order_acquire) || queue_.has_pending()) wake_nap();
}

void Coordinator::wake_nap() {
  {
    std::lock_guard<std::mutex> lock(nap_mu_);
    nap_wake_ = true;
  }
  nap_cv_.notify_one();
}

}  // namespace kolo

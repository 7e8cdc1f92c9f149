// core/idle_policy.h — who runs the coordinator's passes, and what the loop thread does
// when it has none to run (docs/runtime.md, "The waiter runs the pass").
//
// Passes run one at a time under the engine lock (engine()), on the loop thread or on a
// thread waiting on a handle (a helper, core/wait_help.h; Coordinator::help runs the passes,
// this class keeps the score). The policy's job is that the loop thread neither delays a
// peer nor takes a core from a waiting thread:
// - while a helper runs the passes, or this rank is still submitting a burst, the loop
//   naps (nap_for_helpers), woken at once by a helper that leaves work behind;
// - after a pass with no activity the loop waits once (idle_wait), by what ran last and
//   how long ago: sleeps on the queue after helped passes, polls within kSpinWindow of the
//   last activity, then sleeps in growing steps up to KOLO_CYCLE_TIME; a single rank only
//   sleeps on its queue;
// - a bounded helper (Handle::wait_for) starts a pass only while the longest recent pass
//   still fits before its deadline (pass_fits).
//
// Ownership: borrows the queue and the fast path (for their cheap "work may be there"
// hints), which outlive it. Thread safety: nap_for_helpers and idle_wait from the loop
// thread; note_activity under the engine lock; the rest from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "core/config.h"
#include "core/fast_path.h"
#include "core/tensor_queue.h"

namespace kolo {

class IdlePolicy {
 public:
  using Clock = std::chrono::steady_clock;
  // How long a rank keeps spinning after the last activity before it starts to sleep (and
  // a helper before it leaves): long enough to catch a peer's answer to what it just sent,
  // short enough to leave the core to training threads.
  static constexpr std::chrono::microseconds kSpinWindow{200};

  // `helps`: waiting threads may run the passes. `size`, `local_size`: the job's ranks and
  // this host's (a crowded host polls less).
  IdlePolicy(const Config& config, TensorQueue& queue, const FastPath& fast, int size, int local_size, bool helps);

  bool helps() const { return helps_; }
  // Held for every pass, by the loop or a helper.
  std::mutex& engine() { return engine_mu_; }

  // The loop thread, before a pass: naps while a waiter runs the passes or a burst is still
  // being submitted (defer_burst); returns whether it napped, and the loop then starts over
  // instead of running a pass.
  bool nap_for_helpers();
  // The loop thread, after a pass with no activity: one wait, as described above.
  void idle_wait();
  // The loop thread ran a pass with activity: it carries the work again.
  void note_loop_activity() { helped_last_.store(false, std::memory_order_relaxed); }
  // Under the engine lock: a pass with activity ended at `end`, having taken `took`.
  void note_activity(Clock::time_point end, std::chrono::nanoseconds took);
  // Ends the loop's nap, or its sleep on the queue, at once (a shutdown, a helper leaving).
  void wake_nap();
  // The longest idle sleep (KOLO_CYCLE_TIME; autotune changes it).
  void set_max_sleep(std::chrono::microseconds us) { max_sleep_us_.store(us.count(), std::memory_order_relaxed); }

  // Helpers: a thread enters help(), may start a pass ending before `deadline` at `now`,
  // ran a pass with activity, and leaves (`left_work`: its handle is not done or the queue
  // still has requests: the loop takes over at once).
  void helper_enters() { helpers_.fetch_add(1); }
  bool pass_fits(Clock::time_point now, Clock::time_point deadline) const;
  void note_helped_pass() {
    helped_passes_.fetch_add(1, std::memory_order_relaxed);
    helped_last_.store(true, std::memory_order_relaxed);
  }
  void helper_leaves(bool left_work);
  uint64_t helped_passes() const { return helped_passes_.load(); }

  // The short wait of the idle loop and of a helper: polls the queue, the board and `done`
  // (null: none) for ~2 µs (not at all on a crowded host), then yields.
  void poll_then_yield(const std::atomic<bool>* done);

 private:
  // With KOLO_BURST_DEFER=1 where waiters help: whether to leave the requests in the queue
  // for now because this rank is still submitting a burst (a request arrived less than
  // KOLO_BURST_HOLD_MICROSECONDS ago) and no thread waits yet. The thread that submits the
  // burst will wait for it and take it whole (core/wait_help.h): one board round and one
  // fused collective, and no coordinator thread competing with the submitting thread for
  // the cores. Bounded: kDeferBursts gaps at most, then the loop takes what is there.
  bool defer_burst();
  static constexpr int kDeferBursts = 20;
  // Naps for at most `timeout` unless woken (wake_nap).
  void nap(std::chrono::microseconds timeout);
  std::chrono::nanoseconds expected_pass(int64_t now_ns) const;

  // Constant after construction.
  TensorQueue& queue_;
  const FastPath& fast_;
  const bool helps_;
  const bool single_rank_;
  // This host's ranks outnumber its CPUs: a poll gives the core away at once (the peer it
  // waits for may need it) instead of spinning first (poll_then_yield).
  const bool crowded_;
  const bool burst_defer_;
  const int burst_hold_us_;

  std::mutex engine_mu_;
  std::atomic<int64_t> max_sleep_us_;
  std::atomic<int> helpers_{0};               // threads inside help(): the loop naps meanwhile
  std::atomic<uint64_t> helped_passes_{0};    // passes with activity run inside help()
  // The last pass with activity ran inside help() and its helper left nothing pending:
  // waiters carry the work, so the idle loop sleeps (woken by a push no waiter takes)
  // instead of spinning beside them.
  std::atomic<bool> helped_last_{false};
  std::atomic<int64_t> last_activity_ns_;     // steady clock of the last pass with activity
  // The longest recent pass with activity, halved for every second since it ran (written
  // under the engine lock, read by helpers with a deadline): what a bounded helper must leave.
  std::atomic<int64_t> long_pass_ns_{0}, long_pass_at_ns_{0};
  int64_t defer_since_ns_ = 0;  // loop thread: when defer_burst began deferring (0: not)

  std::mutex nap_mu_;  // the loop's nap while helpers run
  std::condition_variable nap_cv_;
  bool nap_wake_ = false;  // guarded by nap_mu_
};

}  // namespace kolo

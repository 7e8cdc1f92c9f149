// optimizer/grad_window.h — the accumulation window that both distributed optimizers share
// (DistributedOptimizer on CPU, nn::gpu::GpuDistributedOptimizer on GPU): which tensors are
// final in the current window of `backward_passes_per_step` passes, their allreduces in
// flight, and the wait at the window's end. How a tensor is submitted (host or device
// memory, fp16 staging) stays with the optimizer.
//
// Ownership: holds the allreduce Handles; the caller owns the gradient memory and must keep
// it alive until wait_quietly() (or this object's destruction) returns.
// Threads: one thread, the training loop's (backward's hook and step() run on it).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kolo/collectives.h"
#include "kolo/handle.h"

namespace kolo {

class GradWindow {
 public:
  // Throws std::invalid_argument when passes_per_step < 1.
  GradWindow(size_t tensors, int passes_per_step) : passes_per_step_(passes_per_step) {
    if (passes_per_step < 1) {
      throw std::invalid_argument("backward_passes_per_step must be >= 1, got " + std::to_string(passes_per_step));
    }
    ready_.assign(tensors, 0);
    handles_.resize(tensors);
  }
  ~GradWindow() { wait_quietly(); }
  GradWindow(const GradWindow&) = delete;
  GradWindow& operator=(const GradWindow&) = delete;

  int passes_per_step() const { return passes_per_step_; }

  // Backward reported tensor `i` final for this pass. True when it is the window's last
  // pass, i.e. the caller should submit it now.
  bool report(int i) { return ++ready_[static_cast<size_t>(i)] == passes_per_step_; }
  void set_handle(int i, Handle h) { handles_[static_cast<size_t>(i)] = std::move(h); }

  // Call after every backward pass. Mid-window: returns false. At the window's end: calls
  // submit(i) for every tensor no layer reported (unused in the forward pass — every rank
  // must still submit the same names, or the job would stall), waits for every allreduce in
  // index order calling done(i) after each (throws kolo::Error naming a failed tensor),
  // records the wait, starts a new window and returns true.
  template <class Submit, class Done>
  bool end_pass(Submit&& submit, Done&& done) {
    if (++passes_ < passes_per_step_) return false;
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < ready_.size(); ++i) {
      if (ready_[i] < passes_per_step_) submit(static_cast<int>(i));
    }
    for (size_t i = 0; i < handles_.size(); ++i) {
      if (!handles_[i].valid()) continue;
      Handle h = std::move(handles_[i]);
      handles_[i] = Handle();
      synchronize(h);
      done(static_cast<int>(i));
    }
    last_wait_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    passes_ = 0;
    std::fill(ready_.begin(), ready_.end(), 0);
    return true;
  }

  // Seconds the last completed window spent waiting in end_pass (the communication the
  // backward pass did not hide).
  double last_wait_seconds() const { return last_wait_seconds_; }

  // Waits for every allreduce still in flight, ignoring their results (teardown).
  void wait_quietly() {
    for (auto& h : handles_) {
      if (h.valid()) (void)h.status();
    }
  }

 private:
  int passes_per_step_;
  int passes_ = 0;             // backward passes since the window began
  double last_wait_seconds_ = 0.0;
  std::vector<int> ready_;     // per tensor: passes whose gradient is final
  std::vector<Handle> handles_;  // per tensor: allreduce in flight (or invalid)
};

}  // namespace kolo

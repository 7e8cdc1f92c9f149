// optimizer/distributed_optimizer.h — data-parallel training of an nn::Model around any
// Optimizer: a client of kolo's framework-neutral core (kolo/gradient_sync.h), which does the
// pass counting, submission, fp16 staging and waiting; this class adds what is nn-specific
// (the ParamStore's gradient views, the per-rank weight, shared-memory gradients).
//
// Usage (see examples/train_lenet.cc):
//   kolo::DistributedOptimizer opt(std::make_unique<kolo::SGD>(model.params(), sgd), {});
//   kolo::broadcast_model(model, 0);  kolo::broadcast_optimizer_state(opt.inner(), 0);
//   for each batch: forward; model.backward(x, dlogits, opt.hook()); opt.step(); opt.zero_grad();
//
// hook() is called by Model::backward right after each layer's backward with that layer's
// parameter indices; the optimizer at once submits one allreduce (average) per tensor,
// named "grad.<parameter name>", so communication overlaps the rest of the backward pass.
// step() waits for all of them, then runs the wrapped optimizer.
//
// backward_passes_per_step = k: gradients of k passes accumulate locally (call step()
// after every pass: it only updates on the k-th); the allreduce is submitted during the
// k-th pass, with the gradients scaled by 1/k, so an update uses the mean gradient over
// k * ranks * batch samples.
// fp16 compression: each gradient is converted to IEEE half into a separate buffer,
// allreduced as float16, and converted back — half the bytes on the wire, at the cost of
// 11-bit precision (fine for gradients; not for parameters, which are never compressed).
// local_weight: multiplies this rank's gradient before averaging (sampler's
// local_weight() for unequal per-rank batches).
// shared_gradients (default on): when kolo has shared memory for this (kolo/memory.h; by
// default on one host with several ranks, KOLO_SHM_ARENA_BYTES=auto), the constructor moves
// the store's gradient buffer into it, so the allreduces are zero-copy (ranks of a host read
// each other's gradients in place). Allocation commits /dev/shm pages and can fail on one
// rank only, so the constructor then agrees with every rank (a one-int allreduce named
// "kolo.distributed_optimizer.shared_gradients.<n>", n counting constructions: construct
// optimizers in the same order on every rank) and shares only if all ranks could; otherwise
// every rank keeps private gradients (gradients_shared() says which; the reason is logged
// at info level). Where kolo has shared memory (on every rank alike) the constructor is
// therefore collective; without it, it makes no collective call. The shared
// buffer lives until kolo::shutdown(): destroy the optimizer's model or stop using its
// gradients before shutting down.
//
// Memory: while an allreduce is in flight, its gradient tensor belongs to kolo; the
// model's backward only writes other layers' gradients, and step() waits before touching.
// Errors: a failed allreduce throws kolo::Error from step() (naming the tensor).
// Ownership: owns the wrapped optimizer; refers to its ParamStore.
// Thread safety: the training thread only.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "kolo/handle.h"
#include "kolo/tensor.h"
#include "nn/model.h"
#include "kolo/gradient_sync.h"
#include "optimizer/optimizer.h"

namespace kolo {

struct DistributedOptions {
  int backward_passes_per_step = 1;
  bool fp16_compression = false;
  double local_weight = 1.0;
  bool shared_gradients = true;
};

class DistributedOptimizer {
 public:
  // Throws std::invalid_argument when backward_passes_per_step < 1.
  DistributedOptimizer(std::unique_ptr<Optimizer> inner, const DistributedOptions& options);
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  // The callback to pass to Model::backward. Valid as long as this optimizer.
  nn::GradReadyFn hook();
  // Call after every backward pass. On the k-th pass since the last update: submits what
  // was not submitted yet (tensors no layer reported), waits for every allreduce, then
  // updates and returns true. Otherwise returns false (gradients keep accumulating).
  // REQUIRES: zero_grad() after each update that returned true.
  bool step();
  void zero_grad() { inner_->zero_grad(); }

  Optimizer& inner() { return *inner_; }
  double lr() const { return inner_->lr(); }
  void set_lr(double lr) { inner_->set_lr(lr); }
  void set_local_weight(double w) { options_.local_weight = w; }
  // True when the gradients live in kolo's shared memory (see shared_gradients).
  bool gradients_shared() const { return gradients_shared_; }
  // Seconds the last update spent in step() waiting for its allreduces: the communication
  // the backward pass did not hide (benchmarks report it; kolo-bench-train).
  double last_wait_seconds() const { return sync_.last_wait_seconds(); }

 private:
  void place_gradients();
  void apply_local_weight(int index, const TensorView& view);  // shared_gradients: see the header comment

  std::unique_ptr<Optimizer> inner_;
  DistributedOptions options_;
  nn::ParamStore& params_;
  bool gradients_shared_ = false;
  int passes_ = 0;  // backward passes since the last update
  // Last member: destroyed first, so it waits for allreduces still writing the gradients.
  GradientSync sync_;
};

// The GradientSync options both trainer optimizers (CPU and GPU) use: average, names
// "grad.<parameter>", the mean over backward_passes_per_step passes. Throws
// std::invalid_argument when backward_passes_per_step < 1.
GradientSyncOptions gradient_sync_options(const DistributedOptions& options,
                                          std::function<void(int, const TensorView&)> before_submit);

// Copies root's parameters and buffers (BatchNorm statistics) to every rank. Blocking.
void broadcast_model(nn::Model& model, int root);
// Copies root's values of one store to every rank (one collective). Blocking.
void broadcast_parameters(nn::ParamStore& params, int root, const std::string& name);
// Copies root's optimizer state (buffers, step count, learning rate) to every rank.
void broadcast_optimizer_state(Optimizer& opt, int root);

}  // namespace kolo

// nn/gpu/distributed.h — data-parallel training of a GpuModel: the GPU twin of
// kolo::DistributedOptimizer (optimizer/distributed_optimizer.h), same usage and semantics,
// and like it a client of kolo::GradientSync (kolo/gradient_sync.h) with device views.
//
//   GpuDistributedOptimizer opt(GpuOptimizer::sgd(model.params(), model.context(), o), {});
//   for each batch: forward; model.backward(x, dlogits, opt.hook()); opt.step(); opt.zero_grad();
//
// hook() runs right after each layer's backward was ENQUEUED: it records a CUDA event on
// the model's stream and submits one kolo allreduce (average) per tensor, named
// "grad.<parameter name>", whose TensorView is that tensor's slice of the device gradient
// buffer (device = this GPU, ready_event = the event). kolo's GPU executor (NCCL, or
// host-staged) waits on the event on its own stream, so the allreduce starts as soon as
// the gradient exists while the earlier layers' backward keeps the GPU busy. step() waits
// for every handle (a completed GPU allreduce is visible to all streams) and enqueues the
// update kernel.
//
// backward_passes_per_step = k: as on CPU (prescale 1/k, submitted during the k-th pass).
// local_weight: this rank's gradient is scaled on the device before submission.
// fp16_compression is not supported on GPU yet (the constructor refuses it).
//
// Memory: while an allreduce is in flight its gradient slice belongs to kolo; backward
// writes only other layers' gradients, and step() waits before the update touches any.
// Errors: a failed allreduce throws kolo::Error from step(), naming the tensor.
// Ownership: owns the GpuOptimizer and one event per parameter tensor.
// Thread safety: the training thread only (the one that drives the model).
#pragma once

#include <memory>
#include <vector>

#include "kolo/handle.h"
#include "nn/gpu/optimizer.h"
#include "nn/model.h"
#include "optimizer/distributed_optimizer.h"
#include "kolo/gradient_sync.h"

namespace kolo::nn::gpu {

class GpuDistributedOptimizer {
 public:
  // Throws std::invalid_argument for backward_passes_per_step < 1 or fp16 compression.
  GpuDistributedOptimizer(std::unique_ptr<GpuOptimizer> inner, const DistributedOptions& options);
  ~GpuDistributedOptimizer();
  GpuDistributedOptimizer(const GpuDistributedOptimizer&) = delete;
  GpuDistributedOptimizer& operator=(const GpuDistributedOptimizer&) = delete;

  // The callback for GpuModel::backward. Valid as long as this optimizer.
  GradReadyFn hook();
  // As DistributedOptimizer::step(): true when an update was applied (enqueued).
  bool step();
  void zero_grad() { inner_->zero_grad(); }

  GpuOptimizer& inner() { return *inner_; }
  double lr() const { return inner_->lr(); }
  void set_lr(double lr) { inner_->set_lr(lr); }
  void set_local_weight(double w) { options_.local_weight = w; }
  double last_wait_seconds() const { return sync_.last_wait_seconds(); }

 private:
  void before_submit(int index, const TensorView& view);

  std::unique_ptr<GpuOptimizer> inner_;
  DistributedOptions options_;
  DeviceParams& params_;
  std::vector<cudaEvent_t> events_;  // per tensor, recorded before its submission
  int passes_ = 0;                   // backward passes since the last update
  // Destroyed before events_ (and waited for explicitly in the destructor).
  GradientSync sync_;
};

// Copies root's parameters and buffers to every rank through kolo's GPU collectives
// (device tensors). Blocking.
void broadcast_gpu_model(DeviceParams& params, DeviceParams& buffers, GpuContext& ctx, const std::string& arch,
                         int root);

}  // namespace kolo::nn::gpu

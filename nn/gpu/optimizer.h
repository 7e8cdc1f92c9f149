// nn/gpu/optimizer.h — SGD (momentum, Nesterov, weight decay) and Adam/AdamW updating a
// GpuModel's parameter buffer from its gradient buffer in ONE kernel per step, with the
// formulas of optimizer/optimizer.h (PyTorch semantics) in fp32.
//
// State (momentum, or Adam's moments) lives in device buffers of the parameter buffer's
// length, under the CPU optimizer's names ("momentum", "exp_avg", "exp_avg_sq"), so that
// copy_state_to/from can move it to a CPU Optimizer of the same kind for checkpoints and
// broadcasts (step count and rate travel too).
//
// Ownership: owns its state buffers; borrows the DeviceParams and context (which outlive
// it). Thread safety: none; the training thread. step() enqueues on the context's stream.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/gpu/context.h"
#include "nn/gpu/device_params.h"
#include "optimizer/optimizer.h"

namespace kolo::nn::gpu {

class GpuOptimizer {
 public:
  // Throw std::invalid_argument for options the CPU optimizers refuse.
  static std::unique_ptr<GpuOptimizer> sgd(DeviceParams& params, GpuContext& ctx, const SgdOptions& o);
  static std::unique_ptr<GpuOptimizer> adam(DeviceParams& params, GpuContext& ctx, const AdamOptions& o);
  ~GpuOptimizer();
  GpuOptimizer(const GpuOptimizer&) = delete;
  GpuOptimizer& operator=(const GpuOptimizer&) = delete;

  // One update from the gradients in params().grads() (enqueued; no wait).
  void step();
  void zero_grad() { params_.zero_grads(ctx_.stream()); }
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  int64_t steps() const { return steps_; }
  std::string kind() const { return kind_; }
  DeviceParams& params() { return params_; }
  GpuContext& context() { return ctx_; }

  // State to / from a CPU optimizer of the same kind and size (throws std::invalid_argument
  // otherwise); both return after the copies finished.
  void copy_state_to(Optimizer& cpu);
  void copy_state_from(Optimizer& cpu);

 private:
  GpuOptimizer(DeviceParams& params, GpuContext& ctx, std::string kind, double lr);
  float* add_state(const std::string& name);
  void check_kind(Optimizer& cpu) const;

  DeviceParams& params_;
  GpuContext& ctx_;
  std::string kind_;  // "sgd", "adam", "adamw"
  double lr_;
  int64_t steps_ = 0;
  SgdOptions sgd_;
  AdamOptions adam_;
  std::vector<std::pair<std::string, float*>> state_;  // device buffers, total_size() each
};

}  // namespace kolo::nn::gpu

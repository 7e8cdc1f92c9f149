// examples/kolo_train/device_engine.h — how kolo-train runs its steps on an accelerator
// (`--device gpu`), behind an interface that needs no CUDA header, so trainer.cc reads the
// same with and without the GPU path.
//
// The CPU model and CPU optimizer stay the host mirror: they are initialised, broadcast
// from rank 0 and checkpointed exactly as on CPU; from_host() copies them to the device
// once, to_host() copies back before a checkpoint. Each training step runs forward,
// loss, backward (with per-layer device-tensor allreduces through kolo) and the update on
// the device; only the batch goes up and the loss comes back.
//
// make_gpu_engine() uses GPU local_rank % visible GPUs. In a build without the GPU path
// it throws std::runtime_error saying so (CPU training is unaffected).
// Ownership: the engine borrows nothing past construction except what it copies.
// Thread safety: the training thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/loss.h"
#include "nn/model.h"
#include "nn/tensor.h"
#include "optimizer/distributed_optimizer.h"

namespace kolo::train {

struct EngineOptimizer {
  std::string kind = "sgd";  // sgd, adam, adamw
  SgdOptions sgd;
  AdamOptions adam;
};

class DeviceEngine {
 public:
  virtual ~DeviceEngine() = default;
  // One batch: returns its loss; *updated tells whether the optimizer stepped.
  virtual nn::LossResult train_step(const nn::Tensor& x, const std::vector<int32_t>& y, double lr, bool* updated) = 0;
  // Evaluation-mode logits of x, copied to the host.
  virtual const nn::Tensor& eval_logits(const nn::Tensor& x) = 0;
  virtual double last_wait_seconds() const = 0;
  virtual void from_host(const nn::Model& model, Optimizer& opt) = 0;
  virtual void to_host(nn::Model& model, Optimizer& opt) = 0;
  // "gpu:0"
  virtual std::string device_name() const = 0;
};

std::unique_ptr<DeviceEngine> make_gpu_engine(const nn::Model& model, const EngineOptimizer& opt,
                                              const DistributedOptions& dist);

}  // namespace kolo::train

// nn/gpu/model.h — a trainable network on one GPU: the twin of an nn::Model.
//
// The architectures are written once (nn/architectures.h) and built here from GPU layers
// (model.cc's builder policy): the CPU layers keep their geometry private, so a GPU model
// cannot be derived from a CPU one by walking its layers. The layout check below, run for
// every architecture by test/gpu/nn_train_test.cc, catches a builder policy that registers
// tensors differently from the CPU one.
//
// A GpuModel is built FROM a CPU model: the same architecture ("lenet", "resnet20",
// "resnet56", "resnet50"), built from GPU layers that register the same tensors in the
// same order, so the parameter and buffer layouts (names, shapes, offsets) are identical
// (checked; a difference throws naming it). Values move between the two by one copy per
// store: the CPU model stays the host mirror used for initialisation, broadcasts and
// checkpoints (upload_from / download_to).
//
// backward() reports each top-level layer's parameter indices right after its backward,
// like nn::Model, so a distributed optimizer can start that layer's allreduce while the
// earlier layers' backward runs. All work is on context().stream().
//
// Ownership: owns its GpuContext, layers and device stores. Not copyable or movable (layers
// point into the stores and the context).
// Thread safety: none; one training thread, which must have `device` current.
#pragma once

#include <memory>
#include <string>

#include "nn/gpu/layer.h"
#include "nn/model.h"

namespace kolo::nn::gpu {

// The GPU layers of a bundled architecture; throws std::invalid_argument for an unknown one.
GpuChain make_gpu_layers(const std::string& arch, int num_classes);

class GpuModel {
 public:
  // Builds on `device` the twin of `cpu` and copies its parameters and buffers.
  GpuModel(const Model& cpu, int device);
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;

  const std::string& arch() const { return arch_; }
  // x: [N, input...] on this device. Returns logits owned by the model.
  const DeviceTensor& forward(const DeviceTensor& x, bool train);
  // Backward of the latest forward(x, true): adds into params().grads() and calls `ready`
  // after each top-level layer that has parameters (on this thread; the gradients are
  // final once the work enqueued so far on the stream has run).
  void backward(const DeviceTensor& x, const DeviceTensor& dlogits, const GradReadyFn& ready = {});

  void upload_from(const Model& cpu);  // parameters and buffers, host -> device
  void download_to(Model& cpu);        // device -> host (for checkpoints, evaluation on CPU)

  GpuContext& context() { return *ctx_; }
  DeviceParams& params() { return *params_; }
  DeviceParams& buffers() { return *buffers_; }

 private:
  std::string arch_;
  Dims input_;
  std::unique_ptr<GpuContext> ctx_;
  std::unique_ptr<DeviceParams> params_, buffers_;
  GpuChain layers_;
};

// Throws std::invalid_argument naming the first tensor whose name, shape or offset differs.
void check_same_layout(const ParamStore& cpu, const ParamStore& gpu, const std::string& what);

}  // namespace kolo::nn::gpu

// nn/gpu/layer.h — the interface of the GPU trainer's layers, and GpuChain, a sequence.
//
// The GPU twin of nn/layer.h, with the same conventions: shapes given to setup() are per
// sample; backward() ADDS parameter gradients into the gradient buffer and OVERWRITES dx;
// dx may be null (first layer). Layers register their tensors under the same names, in
// the same order and with the same shapes as the CPU layers, so a GPU model's parameter
// layout equals its CPU model's (nn/gpu/model.h copies values across by offset).
// Initial values come from the CPU model; GPU layers have no init().
//
// Ownership: a layer owns its descriptors and scratch; it borrows the GpuContext and the
// DeviceParams (owned by the GpuModel, which outlives its layers). Outputs live in the
// chain. Thread safety: none; one training thread. All work goes to the context's stream.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/gpu/context.h"
#include "nn/gpu/device_params.h"
#include "nn/gpu/device_tensor.h"

namespace kolo::nn::gpu {

struct GpuBuildContext {
  GpuContext* gpu = nullptr;
  DeviceParams* params = nullptr;   // trainable tensors (with gradients)
  DeviceParams* buffers = nullptr;  // BatchNorm running statistics
  std::string prefix;               // "layer1.0."
};

class GpuLayer {
 public:
  explicit GpuLayer(std::string name) : name_(std::move(name)) {}
  virtual ~GpuLayer() = default;
  GpuLayer(const GpuLayer&) = delete;
  GpuLayer& operator=(const GpuLayer&) = delete;

  const std::string& name() const { return name_; }
  // Registers tensors; returns the per-sample output shape. Throws std::invalid_argument
  // naming the layer when `in` does not fit.
  virtual Dims setup(const Dims& in, GpuBuildContext& ctx) = 0;
  virtual void forward(const DeviceTensor& x, DeviceTensor& y, bool train) = 0;
  virtual void backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy, DeviceTensor* dx) = 0;
  const std::vector<int>& param_indices() const { return param_indices_; }

 protected:
  // Keeps the context and stores (every setup() calls it first).
  void bind(const GpuBuildContext& ctx) {
    gpu_ = ctx.gpu;
    params_ = ctx.params;
    buffers_ = ctx.buffers;
  }
  int add_param(GpuBuildContext& ctx, const std::string& suffix, const Dims& shape);
  int add_buffer(GpuBuildContext& ctx, const std::string& suffix, const Dims& shape);
  std::string full_name(const GpuBuildContext& ctx) const { return ctx.prefix + name_; }

  GpuContext* gpu_ = nullptr;
  DeviceParams* params_ = nullptr;
  DeviceParams* buffers_ = nullptr;
  std::vector<int> param_indices_;

 private:
  std::string name_;
};

using GpuLayerDoneFn = std::function<void(size_t index, const GpuLayer& layer)>;

class GpuChain {
 public:
  void add(std::unique_ptr<GpuLayer> layer) { layers_.push_back(std::move(layer)); }
  bool empty() const { return layers_.empty(); }
  size_t size() const { return layers_.size(); }
  GpuLayer& layer(size_t i) { return *layers_.at(i); }

  Dims setup(const Dims& in, GpuBuildContext& ctx);
  // Returns the last layer's output (owned by the chain, valid until the next forward).
  const DeviceTensor& forward(const DeviceTensor& x, bool train);
  // REQUIRES: forward(x) was the latest forward. Calls `done` after each layer.
  void backward(const DeviceTensor& x, const DeviceTensor& dy, DeviceTensor* dx, const GpuLayerDoneFn& done = {});
  std::vector<int> param_indices() const;

 private:
  std::vector<std::unique_ptr<GpuLayer>> layers_;
  std::vector<DeviceTensor> acts_;
  DeviceTensor grad_a_, grad_b_;
};

}  // namespace kolo::nn::gpu

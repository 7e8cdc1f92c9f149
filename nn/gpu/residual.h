// nn/gpu/residual.h — the GPU residual block, y = relu(main(x) + shortcut(x)), the twin
// of nn::Residual (empty shortcut = identity; sub-layer names under "<block name>.").
// Ownership/threads: see nn/gpu/layer.h.
#pragma once

#include "nn/gpu/layer.h"

namespace kolo::nn::gpu {

class GpuResidual : public GpuLayer {
 public:
  GpuResidual(std::string name, GpuChain main, GpuChain shortcut)
      : GpuLayer(std::move(name)), main_(std::move(main)), shortcut_(std::move(shortcut)) {}
  Dims setup(const Dims& in, GpuBuildContext& ctx) override;
  void forward(const DeviceTensor& x, DeviceTensor& y, bool train) override;
  void backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy, DeviceTensor* dx) override;

 private:
  GpuChain main_, shortcut_;
  DeviceTensor dsum_, dshort_;
};

}  // namespace kolo::nn::gpu

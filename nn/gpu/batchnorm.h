// nn/gpu/batchnorm.h — BatchNorm2d on cuDNN (spatial mode), the GPU twin of
// nn::BatchNorm2d with the same parameters (weight, bias) and buffers (running_mean,
// running_var) and the same semantics: training normalises with the batch statistics and
// updates the running ones with `momentum` (cuDNN keeps the unbiased variance, as
// PyTorch and the CPU layer do); evaluation uses the running statistics.
// cudnnBatchNormalizationForwardTraining saves the batch mean and inverse deviation, which
// the backward pass reuses. Ownership/threads: see nn/gpu/layer.h.
#pragma once

#include "nn/gpu/cudnn_desc.h"
#include "nn/gpu/layer.h"

namespace kolo::nn::gpu {

class GpuBatchNorm2d : public GpuLayer {
 public:
  explicit GpuBatchNorm2d(std::string name, float momentum = 0.1f, float eps = 1e-5f)
      : GpuLayer(std::move(name)), momentum_(momentum), eps_(eps) {}
  Dims setup(const Dims& in, GpuBuildContext& ctx) override;
  void forward(const DeviceTensor& x, DeviceTensor& y, bool train) override;
  void backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy, DeviceTensor* dx) override;

 private:
  void set_desc(int n);

  float momentum_, eps_;
  int c_ = 0, h_ = 0, w_ = 0;
  int weight_ = -1, bias_ = -1, running_mean_ = -1, running_var_ = -1;
  int desc_n_ = -1;
  TensorDesc x_desc_, stats_desc_;
  DeviceTensor saved_mean_, saved_inv_std_;  // of the latest training forward
  DeviceTensor scratch_dx_;                  // dx when the caller needs none
};

}  // namespace kolo::nn::gpu

// nn/gpu/layers.h — the simple GPU layers, twins of nn/layers.h with the same names and
// parameters: Linear (cuBLAS SGEMM, W [out, in]), ReLU (cuDNN activation), MaxPool2d and
// GlobalAvgPool (cuDNN pooling), Flatten (a device copy, since layers own their outputs).
// Ownership/threads: see nn/gpu/layer.h.
#pragma once

#include "nn/gpu/cudnn_desc.h"
#include "nn/gpu/layer.h"

namespace kolo::nn::gpu {

// y = x W^T + b. Input [N, in].
class GpuLinear : public GpuLayer {
 public:
  GpuLinear(std::string name, int out_features) : GpuLayer(std::move(name)), out_(out_features) {}
  Dims setup(const Dims& in, GpuBuildContext& ctx) override;
  void forward(const DeviceTensor& x, DeviceTensor& y, bool train) override;
  void backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy, DeviceTensor* dx) override;

 private:
  int in_ = 0, out_;
  int weight_ = -1, bias_ = -1;
};

// Any shape; cuDNN sees it as [N, size/N, 1, 1].
class GpuReLU : public GpuLayer {
 public:
  explicit GpuReLU(std::string name) : GpuLayer(std::move(name)) {}
  Dims setup(const Dims& in, GpuBuildContext& ctx) override;
  void forward(const DeviceTensor& x, DeviceTensor& y, bool train) override;
  void backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy, DeviceTensor* dx) override;

 private:
  void set_desc(const DeviceTensor& x);
  ActivationDesc act_;
  TensorDesc desc_;
  int64_t desc_size_ = -1;
};

// Max pooling (square window, padding never selected) or, with global=true, the mean over
// H and W ([N,C,H,W] -> [N,C], GlobalAvgPool).
class GpuPool : public GpuLayer {
 public:
  GpuPool(std::string name, int kernel, int stride, int padding)
      : GpuLayer(std::move(name)), k_(kernel), s_(stride), p_(padding), global_(false) {}
  static std::unique_ptr<GpuPool> global_average(std::string name);
  Dims setup(const Dims& in, GpuBuildContext& ctx) override;
  void forward(const DeviceTensor& x, DeviceTensor& y, bool train) override;
  void backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy, DeviceTensor* dx) override;

 private:
  GpuPool(std::string name) : GpuLayer(std::move(name)), k_(0), s_(1), p_(0), global_(true) {}
  void set_desc(int n);
  int k_, s_, p_;
  bool global_;
  int c_ = 0, h_ = 0, w_ = 0, oh_ = 0, ow_ = 0;
  int desc_n_ = -1;
  PoolDesc pool_;
  TensorDesc x_desc_, y_desc_;
};

class GpuFlatten : public GpuLayer {
 public:
  explicit GpuFlatten(std::string name) : GpuLayer(std::move(name)) {}
  Dims setup(const Dims& in, GpuBuildContext& ctx) override;
  void forward(const DeviceTensor& x, DeviceTensor& y, bool train) override;
  void backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy, DeviceTensor* dx) override;
};

}  // namespace kolo::nn::gpu

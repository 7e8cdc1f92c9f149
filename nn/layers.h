// nn/layers.h — the simple layers: Linear, ReLU, MaxPool2d, GlobalAvgPool, Flatten, Dropout.
// Ownership/threads: see nn/layer.h.
#pragma once

#include <cstdint>

#include "nn/layer.h"

namespace kolo::nn {

// y = x W^T + b, W [out, in] (PyTorch layout). Input [N, in].
class Linear : public Layer {
 public:
  enum class Init { kXavier, kFanInUniform };
  Linear(std::string name, int out_features, Init init = Init::kFanInUniform)
      : Layer(std::move(name)), out_(out_features), init_(init) {}
  Dims setup(const Dims& in, BuildContext& ctx) override;
  void init(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  int in_ = 0, out_;
  Init init_;
  int weight_ = -1, bias_ = -1;
};

class ReLU : public Layer {
 public:
  explicit ReLU(std::string name) : Layer(std::move(name)) {}
  Dims setup(const Dims& in, BuildContext&) override { return in; }
  void forward(const Tensor& x, Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

// Max pooling with a square window; padding counts as -infinity (never selected). The
// argmax of each window is remembered for the backward pass.
class MaxPool2d : public Layer {
 public:
  MaxPool2d(std::string name, int kernel, int stride, int padding = 0)
      : Layer(std::move(name)), k_(kernel), s_(stride), p_(padding) {}
  Dims setup(const Dims& in, BuildContext& ctx) override;
  void forward(const Tensor& x, Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  int k_, s_, p_;
  int c_ = 0, h_ = 0, w_ = 0, oh_ = 0, ow_ = 0;
  std::vector<int32_t> argmax_;  // per output element: offset within its input plane
};

// Mean over H and W: [N,C,H,W] -> [N,C].
class GlobalAvgPool : public Layer {
 public:
  explicit GlobalAvgPool(std::string name) : Layer(std::move(name)) {}
  Dims setup(const Dims& in, BuildContext& ctx) override;
  void forward(const Tensor& x, Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

// [N, ...] -> [N, prod(...)]; a copy, because layers own their outputs.
class Flatten : public Layer {
 public:
  explicit Flatten(std::string name) : Layer(std::move(name)) {}
  Dims setup(const Dims& in, BuildContext&) override { return {static_cast<int>(dims_product(in))}; }
  void forward(const Tensor& x, Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

// Inverted dropout: in training, zeroes each element with probability p and scales the
// rest by 1/(1-p); the identity in evaluation. Masks come from the model's Rng.
class Dropout : public Layer {
 public:
  Dropout(std::string name, float p) : Layer(std::move(name)), p_(p) {}
  Dims setup(const Dims& in, BuildContext& ctx) override;
  void forward(const Tensor& x, Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  float p_;
  Rng* rng_ = nullptr;
  std::vector<float> mask_;  // 0 or 1/(1-p) per element of the latest training forward
  bool masked_ = false;
};

}  // namespace kolo::nn

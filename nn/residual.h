// nn/residual.h — a residual block: y = relu(main(x) + shortcut(x)).
//
// `main` and `shortcut` are Chains built by the caller (ResNet's basic or bottleneck
// blocks); an empty shortcut is the identity. The block registers its sub-layers' tensors
// under "<block name>." so names match torchvision's ("layer1.0.conv1.weight").
// Ownership/threads: see nn/layer.h.
#pragma once

#include "nn/layer.h"

namespace kolo::nn {

class Residual : public Layer {
 public:
  Residual(std::string name, Chain main, Chain shortcut)
      : Layer(std::move(name)), main_(std::move(main)), shortcut_(std::move(shortcut)) {}
  Dims setup(const Dims& in, BuildContext& ctx) override;
  void init(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
  // Reports each sub-layer of the main branch, then of the shortcut, as it finishes.
  void backward_reporting(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx,
                          const GradReadyFn& ready) override;

 private:
  Chain main_, shortcut_;
  Tensor dsum_, dshort_;
};

}  // namespace kolo::nn

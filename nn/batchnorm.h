// nn/batchnorm.h — BatchNorm2d over [N,C,H,W]: per-channel statistics over N, H and W.
//
// Training: normalises with the batch's mean and (biased) variance and updates the running
// statistics, running = (1-momentum)*running + momentum*batch, with the unbiased variance
// (as PyTorch does). Evaluation: normalises with the running statistics.
// Parameters: weight (gamma, init 1) and bias (beta, init 0). Buffers: running_mean,
// running_var — kept in the model's buffer store so checkpoints and the start-of-training
// broadcast include them.
// With Then::kRelu the layer is BatchNorm followed by ReLU in one pass over the data each way
// (ResNet's conv-bn-relu): y = max(0, bn(x)).
// Distributed note: statistics are per rank (not synchronised), as in Horovod and PyTorch
// DDP without SyncBatchNorm; hence N ranks x batch b is not bit-equal to 1 rank x N*b.
#pragma once

#include "nn/layer.h"

namespace kolo::nn {

class BatchNorm2d : public Layer {
 public:
  enum class Then { kNothing, kRelu };
  explicit BatchNorm2d(std::string name, float momentum = 0.1f, float eps = 1e-5f,
                       Then then = Then::kNothing)
      : Layer(std::move(name)), relu_(then == Then::kRelu), momentum_(momentum), eps_(eps) {}
  // BatchNorm then ReLU, PyTorch's default momentum and eps.
  static std::unique_ptr<BatchNorm2d> with_relu(std::string name) {
    return std::make_unique<BatchNorm2d>(std::move(name), 0.1f, 1e-5f, Then::kRelu);
  }
  Dims setup(const Dims& in, BuildContext& ctx) override;
  void init(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  // Batch mean and biased variance of channel c of x.
  void statistics(const Tensor& x, int c, float* mean, float* var) const;

  bool relu_;
  float momentum_, eps_;
  int c_ = 0;
  int weight_ = -1, bias_ = -1, running_mean_ = -1, running_var_ = -1;
  // Of the latest forward: per channel mean and 1/sqrt(var+eps) used to normalise.
  std::vector<float> mean_, inv_std_;
};

}  // namespace kolo::nn

// GpuBatchNorm2d: cuDNN spatial batch normalisation, training and inference.
#include "nn/gpu/batchnorm.h"

#include <stdexcept>

namespace kolo::nn::gpu {
namespace {
constexpr float kOne = 1.0f, kZero = 0.0f;
}  // namespace

Dims GpuBatchNorm2d::setup(const Dims& in, GpuBuildContext& ctx) {
  bind(ctx);
  if (in.size() != 3) {
    throw std::invalid_argument("GpuBatchNorm2d \"" + full_name(ctx) + "\": expects [C,H,W], got " + dims_string(in));
  }
  if (eps_ < CUDNN_BN_MIN_EPSILON) {
    throw std::invalid_argument("GpuBatchNorm2d \"" + full_name(ctx) + "\": eps below cuDNN's minimum");
  }
  c_ = in[0];
  h_ = in[1];
  w_ = in[2];
  weight_ = add_param(ctx, "weight", {c_});
  bias_ = add_param(ctx, "bias", {c_});
  running_mean_ = add_buffer(ctx, "running_mean", {c_});
  running_var_ = add_buffer(ctx, "running_var", {c_});
  stats_desc_.set(1, c_, 1, 1);
  return in;
}

void GpuBatchNorm2d::set_desc(int n) {
  if (n == desc_n_) return;
  x_desc_.set(n, c_, h_, w_);
  desc_n_ = n;
}

void GpuBatchNorm2d::forward(const DeviceTensor& x, DeviceTensor& y, bool train) {
  const int n = x.dim(0);
  set_desc(n);
  y.resize(x.shape());
  cudnnHandle_t h = gpu_->cudnn();
  if (!train) {
    KOLO_NN_CUDNN(cudnnBatchNormalizationForwardInference(
        h, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_desc_.get(), x.data(), x_desc_.get(), y.data(),
        stats_desc_.get(), params_->value(weight_), params_->value(bias_), buffers_->value(running_mean_),
        buffers_->value(running_var_), eps_));
    return;
  }
  saved_mean_.resize({c_});
  saved_inv_std_.resize({c_});
  KOLO_NN_CUDNN(cudnnBatchNormalizationForwardTraining(
      h, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_desc_.get(), x.data(), x_desc_.get(), y.data(), stats_desc_.get(),
      params_->value(weight_), params_->value(bias_), momentum_, buffers_->value(running_mean_),
      buffers_->value(running_var_), eps_, saved_mean_.data(), saved_inv_std_.data()));
}

void GpuBatchNorm2d::backward(const DeviceTensor& x, const DeviceTensor&, const DeviceTensor& dy, DeviceTensor* dx) {
  set_desc(x.dim(0));
  // cuDNN always computes dx; without a caller's dx it goes to a scratch tensor.
  DeviceTensor* out = dx ? dx : &scratch_dx_;
  out->resize(x.shape());
  // Data gradient overwritten (beta 0), parameter gradients accumulated (beta 1).
  KOLO_NN_CUDNN(cudnnBatchNormalizationBackward(
      gpu_->cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kOne, x_desc_.get(), x.data(), x_desc_.get(),
      dy.data(), x_desc_.get(), out->data(), stats_desc_.get(), params_->value(weight_), params_->grad(weight_),
      params_->grad(bias_), eps_, saved_mean_.data(), saved_inv_std_.data()));
}

}  // namespace kolo::nn::gpu

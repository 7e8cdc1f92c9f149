// BatchNorm2d forward (train/eval) and backward.
#include "nn/batchnorm.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kolo::nn {

Dims BatchNorm2d::setup(const Dims& in, BuildContext& ctx) {
  if (in.size() != 3) {
    throw std::invalid_argument("BatchNorm2d \"" + full_name(ctx) + "\": needs [C,H,W], got " +
                                dims_string(in));
  }
  c_ = in[0];
  weight_ = add_param(ctx, "weight", {c_});
  bias_ = add_param(ctx, "bias", {c_});
  running_mean_ = add_buffer(ctx, "running_mean", {c_});
  running_var_ = add_buffer(ctx, "running_var", {c_});
  return in;
}

void BatchNorm2d::init(Rng& /*rng*/) {
  std::fill_n(params_->value(weight_), c_, 1.0f);
  std::fill_n(params_->value(bias_), c_, 0.0f);
  std::fill_n(buffers_->value(running_mean_), c_, 0.0f);
  std::fill_n(buffers_->value(running_var_), c_, 1.0f);
}

void BatchNorm2d::forward(const Tensor& x, Tensor& y, bool train) {
  const int n = x.dim(0), hw = x.dim(2) * x.dim(3);
  const int64_t count = int64_t{n} * hw, img = int64_t{c_} * hw;
  y.resize(x.shape());
  mean_.resize(static_cast<size_t>(c_));
  inv_std_.resize(static_cast<size_t>(c_));
  float* rmean = buffers_->value(running_mean_);
  float* rvar = buffers_->value(running_var_);
  const float* gamma = params_->value(weight_);
  const float* beta = params_->value(bias_);
  for (int c = 0; c < c_; ++c) {
    float mean = rmean[c], var = rvar[c];
    if (train) {
      // Two passes (mean, then squared deviations) in double: exact enough for large
      // batches without the cancellation of E[x^2]-E[x]^2.
      double s = 0.0;
      for (int i = 0; i < n; ++i) {
        const float* p = x.data() + i * img + int64_t{c} * hw;
        float ps = 0.0f;
        for (int j = 0; j < hw; ++j) ps += p[j];
        s += ps;
      }
      mean = static_cast<float>(s / count);
      double ss = 0.0;
      for (int i = 0; i < n; ++i) {
        const float* p = x.data() + i * img + int64_t{c} * hw;
        float ps = 0.0f;
        for (int j = 0; j < hw; ++j) ps += (p[j] - mean) * (p[j] - mean);
        ss += ps;
      }
      var = static_cast<float>(ss / count);
      const float unbiased = count > 1 ? static_cast<float>(ss / (count - 1)) : var;
      rmean[c] = (1.0f - momentum_) * rmean[c] + momentum_ * mean;
      rvar[c] = (1.0f - momentum_) * rvar[c] + momentum_ * unbiased;
    }
    const float inv = 1.0f / std::sqrt(var + eps_);
    mean_[static_cast<size_t>(c)] = mean;
    inv_std_[static_cast<size_t>(c)] = inv;
    const float scale = gamma[c] * inv, shift = beta[c] - mean * scale;
    for (int i = 0; i < n; ++i) {
      const float* p = x.data() + i * img + int64_t{c} * hw;
      float* o = y.data() + i * img + int64_t{c} * hw;
      for (int j = 0; j < hw; ++j) o[j] = p[j] * scale + shift;
    }
  }
}

void BatchNorm2d::backward(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  const int n = x.dim(0), hw = x.dim(2) * x.dim(3);
  const int64_t img = int64_t{c_} * hw;
  const float inv_count = 1.0f / static_cast<float>(int64_t{n} * hw);
  const float* gamma = params_->value(weight_);
  float* dgamma = params_->grad(weight_);
  float* dbeta = params_->grad(bias_);
  if (dx) dx->resize(x.shape());
  for (int c = 0; c < c_; ++c) {
    const float mean = mean_[static_cast<size_t>(c)], inv = inv_std_[static_cast<size_t>(c)];
    // sum(dy) and sum(dy * xhat), xhat recomputed from x rather than stored.
    double sg = 0.0, sgx = 0.0;
    for (int i = 0; i < n; ++i) {
      const float* p = x.data() + i * img + int64_t{c} * hw;
      const float* g = dy.data() + i * img + int64_t{c} * hw;
      float a = 0.0f, b = 0.0f;
      for (int j = 0; j < hw; ++j) {
        a += g[j];
        b += g[j] * (p[j] - mean);
      }
      sg += a;
      sgx += b;
    }
    const float sum_g = static_cast<float>(sg), sum_gxhat = static_cast<float>(sgx) * inv;
    dgamma[c] += sum_gxhat;
    dbeta[c] += sum_g;
    if (!dx) continue;
    // dx = gamma*inv * (dy - mean(dy) - xhat * mean(dy*xhat))
    const float k = gamma[c] * inv, mg = sum_g * inv_count, mgx = sum_gxhat * inv_count;
    for (int i = 0; i < n; ++i) {
      const float* p = x.data() + i * img + int64_t{c} * hw;
      const float* g = dy.data() + i * img + int64_t{c} * hw;
      float* d = dx->data() + i * img + int64_t{c} * hw;
      for (int j = 0; j < hw; ++j) d[j] = k * (g[j] - mg - (p[j] - mean) * inv * mgx);
    }
  }
}

}  // namespace kolo::nn

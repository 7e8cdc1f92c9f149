// BatchNorm2d forward (train/eval) and backward, optionally followed by ReLU.
//
// Every pass walks one (image, channel) plane at a time: a plane of a ResNet activation
// (at most 32x32 floats) sits in L1, so the per-plane second pass of the statistics is
// cheap, while the whole tensor (megabytes) is read from memory as few times as possible.
// Reductions run on explicit 8-float vectors (nn/simd.h); per-plane partial sums meet in
// double.
#include "nn/batchnorm.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "nn/simd.h"

namespace kolo::nn {
namespace {

using simd::hsum;
using simd::load;
using simd::splat;
using simd::v8;

float plane_sum(const float* p, int n) {
  v8 acc{};
  int j = 0;
  for (; j + 8 <= n; j += 8) acc += load(p + j);
  float s = hsum(acc);
  for (; j < n; ++j) s += p[j];
  return s;
}

float plane_squared_deviation(const float* p, int n, float mean) {
  const v8 m = splat(mean);
  v8 acc{};
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const v8 d = load(p + j) - m;
    acc += d * d;
  }
  float s = hsum(acc);
  for (; j < n; ++j) s += (p[j] - mean) * (p[j] - mean);
  return s;
}

// sum(g) and sum(g * (x - mean)) over one plane, where g = dy where y > cut, else 0.
void plane_gradient_sums(const float* x, const float* dy, const float* y, int n, float mean,
                         float cut, float* sum_g, float* sum_gx) {
  const v8 m = splat(mean), c = splat(cut), zero{};
  v8 a{}, b{};
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const v8 g = load(y + j) > c ? load(dy + j) : zero;
    a += g;
    b += g * (load(x + j) - m);
  }
  float sa = hsum(a), sb = hsum(b);
  for (; j < n; ++j) {
    const float g = y[j] > cut ? dy[j] : 0.0f;
    sa += g;
    sb += g * (x[j] - mean);
  }
  *sum_g = sa;
  *sum_gx = sb;
}

}  // namespace

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

void BatchNorm2d::statistics(const Tensor& x, int c, float* mean, float* var) const {
  // Per plane: mean and squared deviations about it (two passes over an L1-resident
  // plane), merged across planes with Chan et al.'s pairwise update in double — exact
  // enough for large batches, without the cancellation of E[x^2]-E[x]^2.
  const int n = x.dim(0), hw = x.dim(2) * x.dim(3);
  const int64_t img = int64_t{c_} * hw;
  double m = 0.0, m2 = 0.0;
  for (int i = 0; i < n; ++i) {
    const float* p = x.data() + i * img + int64_t{c} * hw;
    const float pm = plane_sum(p, hw) / static_cast<float>(hw);
    const double q = plane_squared_deviation(p, hw, pm);
    const double before = static_cast<double>(hw) * i, after = before + hw;
    const double delta = pm - m;
    m += delta * hw / after;
    m2 += q + delta * delta * before * hw / after;
  }
  *mean = static_cast<float>(m);
  *var = static_cast<float>(m2 / (static_cast<double>(hw) * n));
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
  const float floor = relu_ ? 0.0f : -INFINITY;
  for (int c = 0; c < c_; ++c) {
    float mean = rmean[c], var = rvar[c];
    if (train) {
      statistics(x, c, &mean, &var);
      const float unbiased = count > 1 ? var * static_cast<float>(count) / (count - 1) : var;
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
#pragma omp simd
      for (int j = 0; j < hw; ++j) o[j] = std::max(p[j] * scale + shift, floor);
    }
  }
}

void BatchNorm2d::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  const int n = x.dim(0), hw = x.dim(2) * x.dim(3);
  const int64_t img = int64_t{c_} * hw;
  const float inv_count = 1.0f / static_cast<float>(int64_t{n} * hw);
  const float* gamma = params_->value(weight_);
  float* dgamma = params_->grad(weight_);
  float* dbeta = params_->grad(bias_);
  if (dx) dx->resize(x.shape());
  // With a fused ReLU the gradient reaching the normalisation is dy where y > 0, else 0.
  const float cut = relu_ ? 0.0f : -INFINITY;
  for (int c = 0; c < c_; ++c) {
    const float mean = mean_[static_cast<size_t>(c)], inv = inv_std_[static_cast<size_t>(c)];
    // sum(g) and sum(g * xhat), xhat recomputed from x rather than stored.
    double sg = 0.0, sgx = 0.0;
    for (int i = 0; i < n; ++i) {
      const int64_t at = i * img + int64_t{c} * hw;
      const float* p = x.data() + at;
      const float* g = dy.data() + at;
      float a, b;
      plane_gradient_sums(p, g, y.data() + at, hw, mean, cut, &a, &b);
      sg += a;
      sgx += b;
    }
    const float sum_g = static_cast<float>(sg), sum_gxhat = static_cast<float>(sgx) * inv;
    dgamma[c] += sum_gxhat;
    dbeta[c] += sum_g;
    if (!dx) continue;
    // dx = gamma*inv * (g - mean(g) - xhat * mean(g*xhat))
    const float k = gamma[c] * inv, mg = sum_g * inv_count, mgx = sum_gxhat * inv_count;
    for (int i = 0; i < n; ++i) {
      const int64_t at = i * img + int64_t{c} * hw;
      const float* p = x.data() + at;
      const float* g = dy.data() + at;
      const float* o = y.data() + at;
      float* d = dx->data() + at;
#pragma omp simd
      for (int j = 0; j < hw; ++j) {
        const float gv = g[j];  // read unconditionally: a blend, not a masked load
        const float gj = o[j] > cut ? gv : 0.0f;
        d[j] = k * (gj - mg - (p[j] - mean) * inv * mgx);
      }
    }
  }
}

}  // namespace kolo::nn

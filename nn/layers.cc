// Linear, ReLU, MaxPool2d, GlobalAvgPool, Flatten and Dropout.
#include "nn/layers.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "nn/gemm.h"

namespace kolo::nn {

Dims Linear::setup(const Dims& in, BuildContext& ctx) {
  if (in.size() != 1) {
    throw std::invalid_argument("Linear \"" + full_name(ctx) + "\": needs [features] input, got " +
                                dims_string(in) + " (add a Flatten before it)");
  }
  in_ = in[0];
  weight_ = add_param(ctx, "weight", {out_, in_});
  bias_ = add_param(ctx, "bias", {out_});
  return {out_};
}

void Linear::init(Rng& rng) {
  float* w = params_->value(weight_);
  const size_t n = params_->info(weight_).size;
  if (init_ == Init::kXavier) xavier_uniform(w, n, in_, out_, rng);
  else uniform_fan_in(w, n, in_, rng);
  // PyTorch's default bias: uniform in +-1/sqrt(fan_in), which also breaks symmetry.
  uniform_fan_in(params_->value(bias_), static_cast<size_t>(out_), in_, rng);
}

void Linear::forward(const Tensor& x, Tensor& y, bool /*train*/) {
  const int n = x.dim(0);
  y.resize({n, out_});
  const float* b = params_->value(bias_);
  for (int i = 0; i < n; ++i) std::memcpy(y.data() + int64_t{i} * out_, b, sizeof(float) * out_);
  gemm(false, true, n, out_, in_, 1.0f, x.data(), in_, params_->value(weight_), in_, 1.0f,
       y.data(), out_);
}

void Linear::backward(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  const int n = x.dim(0);
  gemm(true, false, out_, in_, n, 1.0f, dy.data(), out_, x.data(), in_, 1.0f,
       params_->grad(weight_), in_);
  float* db = params_->grad(bias_);
  for (int i = 0; i < n; ++i) {
    const float* g = dy.data() + int64_t{i} * out_;
    for (int j = 0; j < out_; ++j) db[j] += g[j];
  }
  if (dx) {
    dx->resize(x.shape());
    gemm(false, false, n, in_, out_, 1.0f, dy.data(), out_, params_->value(weight_), in_, 0.0f,
         dx->data(), in_);
  }
}

void ReLU::forward(const Tensor& x, Tensor& y, bool /*train*/) {
  y.resize(x.shape());
  const float* in = x.data();
  float* out = y.data();
  for (int64_t i = 0, n = x.size(); i < n; ++i) out[i] = std::max(in[i], 0.0f);
}

void ReLU::backward(const Tensor& /*x*/, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  dx->resize(y.shape());
  const float* out = y.data();
  const float* g = dy.data();
  float* d = dx->data();
  for (int64_t i = 0, n = y.size(); i < n; ++i) d[i] = out[i] > 0.0f ? g[i] : 0.0f;
}

Dims MaxPool2d::setup(const Dims& in, BuildContext& ctx) {
  if (in.size() != 3 || in[1] + 2 * p_ < k_ || in[2] + 2 * p_ < k_ || 2 * p_ > k_) {
    throw std::invalid_argument("MaxPool2d \"" + full_name(ctx) + "\": needs [C,H,W] of at least " +
                                std::to_string(k_) + "x" + std::to_string(k_) + ", got " +
                                dims_string(in));
  }
  c_ = in[0];
  h_ = in[1];
  w_ = in[2];
  oh_ = (h_ + 2 * p_ - k_) / s_ + 1;
  ow_ = (w_ + 2 * p_ - k_) / s_ + 1;
  return {c_, oh_, ow_};
}

void MaxPool2d::forward(const Tensor& x, Tensor& y, bool /*train*/) {
  const int n = x.dim(0);
  y.resize({n, c_, oh_, ow_});
  argmax_.resize(static_cast<size_t>(y.size()));
  const int64_t planes = int64_t{n} * c_;
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* in = x.data() + pl * h_ * w_;
    float* out = y.data() + pl * oh_ * ow_;
    int32_t* am = argmax_.data() + pl * oh_ * ow_;
    for (int i = 0; i < oh_; ++i) {
      const int a0 = std::max(i * s_ - p_, 0), a1 = std::min(i * s_ - p_ + k_, h_);
      for (int j = 0; j < ow_; ++j) {
        const int b0 = std::max(j * s_ - p_, 0), b1 = std::min(j * s_ - p_ + k_, w_);
        float best = -std::numeric_limits<float>::infinity();
        int32_t where = a0 * w_ + b0;
        for (int a = a0; a < a1; ++a) {
          for (int b = b0; b < b1; ++b) {
            if (in[a * w_ + b] > best) {
              best = in[a * w_ + b];
              where = a * w_ + b;
            }
          }
        }
        out[i * ow_ + j] = best;
        am[i * ow_ + j] = where;
      }
    }
  }
}

void MaxPool2d::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  dx->resize(x.shape());
  dx->zero();
  const int64_t planes = int64_t{x.dim(0)} * c_, out_plane = int64_t{oh_} * ow_;
  for (int64_t pl = 0; pl < planes; ++pl) {
    float* d = dx->data() + pl * h_ * w_;
    const float* g = dy.data() + pl * out_plane;
    const int32_t* am = argmax_.data() + pl * out_plane;
    for (int64_t o = 0; o < out_plane; ++o) d[am[o]] += g[o];
  }
  (void)y;
}

Dims GlobalAvgPool::setup(const Dims& in, BuildContext& ctx) {
  if (in.size() != 3) {
    throw std::invalid_argument("GlobalAvgPool \"" + full_name(ctx) + "\": needs [C,H,W], got " +
                                dims_string(in));
  }
  return {in[0]};
}

void GlobalAvgPool::forward(const Tensor& x, Tensor& y, bool /*train*/) {
  const int n = x.dim(0), c = x.dim(1), hw = x.dim(2) * x.dim(3);
  y.resize({n, c});
  for (int64_t pl = 0; pl < int64_t{n} * c; ++pl) {
    const float* in = x.data() + pl * hw;
    float s = 0.0f;
    for (int i = 0; i < hw; ++i) s += in[i];
    y[pl] = s / static_cast<float>(hw);
  }
}

void GlobalAvgPool::backward(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  dx->resize(x.shape());
  const int hw = x.dim(2) * x.dim(3);
  const float inv = 1.0f / static_cast<float>(hw);
  for (int64_t pl = 0; pl < int64_t{x.dim(0)} * x.dim(1); ++pl) {
    std::fill_n(dx->data() + pl * hw, hw, dy[pl] * inv);
  }
}

void Flatten::forward(const Tensor& x, Tensor& y, bool /*train*/) {
  y.resize({x.dim(0), static_cast<int>(x.sample_size())});
  std::memcpy(y.data(), x.data(), sizeof(float) * static_cast<size_t>(x.size()));
}

void Flatten::backward(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  dx->resize(x.shape());
  std::memcpy(dx->data(), dy.data(), sizeof(float) * static_cast<size_t>(dy.size()));
}

Dims Dropout::setup(const Dims& in, BuildContext& ctx) {
  if (!(p_ >= 0.0f && p_ < 1.0f)) {
    throw std::invalid_argument("Dropout \"" + full_name(ctx) + "\": p must be in [0,1), got " +
                                std::to_string(p_));
  }
  rng_ = ctx.rng;
  return in;
}

void Dropout::forward(const Tensor& x, Tensor& y, bool train) {
  y.resize(x.shape());
  masked_ = train && p_ > 0.0f;
  if (!masked_) {
    std::memcpy(y.data(), x.data(), sizeof(float) * static_cast<size_t>(x.size()));
    return;
  }
  mask_.resize(static_cast<size_t>(x.size()));
  const float keep = 1.0f / (1.0f - p_);
  for (int64_t i = 0; i < x.size(); ++i) {
    mask_[static_cast<size_t>(i)] = rng_->uniform() < p_ ? 0.0f : keep;
    y[i] = x[i] * mask_[static_cast<size_t>(i)];
  }
}

void Dropout::backward(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  dx->resize(x.shape());
  for (int64_t i = 0; i < dy.size(); ++i) {
    (*dx)[i] = masked_ ? dy[i] * mask_[static_cast<size_t>(i)] : dy[i];
  }
}

}  // namespace kolo::nn

// Conv2d: im2col + GEMM forward, and the two GEMMs (weights, inputs) of the backward pass.
#include "nn/conv.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "nn/gemm.h"

namespace kolo::nn {
namespace {

// Columns per GEMM we aim for: wide enough for an efficient product, small enough that
// the column buffer (K x cols floats) stays in L2/L3.
constexpr int kTargetColumns = 3136;

// Output positions [lo, hi) whose input index o*stride - pad + k falls inside [0, size).
void valid_range(int out, int size, int stride, int pad, int k, int* lo, int* hi) {
  int l = 0;
  while (l < out && l * stride - pad + k < 0) ++l;
  int h = out;
  while (h > l && (h - 1) * stride - pad + k >= size) --h;
  *lo = l;
  *hi = h;
}

}  // namespace

Dims Conv2d::setup(const Dims& in, BuildContext& ctx) {
  if (in.size() != 3) {
    throw std::invalid_argument("Conv2d \"" + full_name(ctx) + "\": needs [C,H,W] input, got " +
                                dims_string(in));
  }
  in_c_ = in[0];
  in_h_ = in[1];
  in_w_ = in[2];
  out_h_ = (in_h_ + 2 * spec_.padding - spec_.kernel) / spec_.stride + 1;
  out_w_ = (in_w_ + 2 * spec_.padding - spec_.kernel) / spec_.stride + 1;
  if (out_h_ <= 0 || out_w_ <= 0) {
    throw std::invalid_argument("Conv2d \"" + full_name(ctx) + "\": input " + dims_string(in) +
                                " is smaller than the kernel");
  }
  weight_ = add_param(ctx, "weight", {spec_.out_channels, in_c_, spec_.kernel, spec_.kernel});
  if (spec_.bias) bias_ = add_param(ctx, "bias", {spec_.out_channels});
  return {spec_.out_channels, out_h_, out_w_};
}

void Conv2d::init(Rng& rng) {
  const int fan_in = in_c_ * spec_.kernel * spec_.kernel;
  kaiming_normal(params_->value(weight_), params_->info(weight_).size, fan_in, rng);
  if (bias_ >= 0) std::fill_n(params_->value(bias_), spec_.out_channels, 0.0f);
}

bool Conv2d::pointwise() const {
  return spec_.kernel == 1 && spec_.stride == 1 && spec_.padding == 0;
}

int Conv2d::chunk_images(int batch) const {
  if (pointwise()) return 1;  // the input already is the column matrix of one image
  const int hw = out_h_ * out_w_;
  return std::clamp(kTargetColumns / hw, 1, std::max(batch, 1));
}

// One (input channel c, kernel row ki, kernel column kj) tap for one image: where the image's
// plane c starts in the input, where the tap's row for the image starts in the column
// matrix, and the output positions [oh_lo, oh_hi) x [ow_lo, ow_hi) whose input falls inside
// the image (the others read padding).
struct Conv2d::Tap {
  int ki, kj;
  int oh_lo, oh_hi, ow_lo, ow_hi;
  int64_t in, col;
};

template <class Fn>
void Conv2d::for_each_tap(int nb, Fn&& fn) const {
  const int k = spec_.kernel, s = spec_.stride, p = spec_.padding;
  const int64_t hw = int64_t{out_h_} * out_w_, cols = nb * hw;
  const int64_t in_plane = int64_t{in_h_} * in_w_;
  Tap t{};
  for (int c = 0; c < in_c_; ++c) {
    for (t.ki = 0; t.ki < k; ++t.ki) {
      valid_range(out_h_, in_h_, s, p, t.ki, &t.oh_lo, &t.oh_hi);
      for (t.kj = 0; t.kj < k; ++t.kj) {
        valid_range(out_w_, in_w_, s, p, t.kj, &t.ow_lo, &t.ow_hi);
        const int64_t row = ((int64_t{c} * k + t.ki) * k + t.kj) * cols;
        for (int n = 0; n < nb; ++n) {
          t.in = (int64_t{n} * in_c_ + c) * in_plane;
          t.col = row + n * hw;
          fn(t);
        }
      }
    }
  }
}

void Conv2d::im2col(const float* x, int nb, float* col) const {
  const int s = spec_.stride, p = spec_.padding, hw = out_h_ * out_w_;
  for_each_tap(nb, [&](const Tap& t) {
    const float* src = x + t.in;
    float* dst = col + t.col;
    std::fill(dst, dst + t.oh_lo * out_w_, 0.0f);
    for (int oh = t.oh_lo; oh < t.oh_hi; ++oh) {
      float* d = dst + oh * out_w_;
      const float* srow = src + (oh * s - p + t.ki) * in_w_ - p + t.kj;
      std::fill(d, d + t.ow_lo, 0.0f);
      if (s == 1) {
        std::memcpy(d + t.ow_lo, srow + t.ow_lo, sizeof(float) * (t.ow_hi - t.ow_lo));
      } else {
        for (int ow = t.ow_lo; ow < t.ow_hi; ++ow) d[ow] = srow[ow * s];
      }
      std::fill(d + t.ow_hi, d + out_w_, 0.0f);
    }
    std::fill(dst + t.oh_hi * out_w_, dst + hw, 0.0f);
  });
}

void Conv2d::col2im(const float* dcol, int nb, float* dx) const {
  const int s = spec_.stride, p = spec_.padding;
  for_each_tap(nb, [&](const Tap& t) {
    const float* src = dcol + t.col;
    float* dst = dx + t.in;
    for (int oh = t.oh_lo; oh < t.oh_hi; ++oh) {
      const float* sr = src + oh * out_w_;
      float* drow = dst + (oh * s - p + t.ki) * in_w_ - p + t.kj;
      for (int ow = t.ow_lo; ow < t.ow_hi; ++ow) drow[ow * s] += sr[ow];
    }
  });
}

void Conv2d::forward(const Tensor& x, Tensor& y, bool /*train*/) {
  const int n = x.dim(0), cout = spec_.out_channels, hw = out_h_ * out_w_;
  y.resize({n, cout, out_h_, out_w_});
  if (direct()) forward_direct(x, y);
  else forward_im2col(x, y);
  if (bias_ >= 0) {
    const float* b = params_->value(bias_);
    const int64_t out_img = int64_t{cout} * hw;
    for (int i = 0; i < n; ++i) {
      for (int co = 0; co < cout; ++co) {
        float* o = y.data() + i * out_img + int64_t{co} * hw;
        for (int j = 0; j < hw; ++j) o[j] += b[co];
      }
    }
  }
}

void Conv2d::forward_im2col(const Tensor& x, Tensor& y) {
  const int n = x.dim(0), cout = spec_.out_channels;
  const int kdim = in_c_ * spec_.kernel * spec_.kernel, hw = out_h_ * out_w_;
  const int nb_max = chunk_images(n);
  if (!pointwise()) col_.resize(static_cast<size_t>(kdim) * nb_max * hw);
  if (nb_max > 1) chunk_.resize(static_cast<size_t>(cout) * nb_max * hw);
  const float* w = params_->value(weight_);
  const int64_t in_img = static_cast<int64_t>(in_c_) * in_h_ * in_w_, out_img = int64_t{cout} * hw;
  for (int n0 = 0; n0 < n; n0 += nb_max) {
    const int nb = std::min(nb_max, n - n0), cols = nb * hw;
    const float* col = x.data() + n0 * in_img;
    if (!pointwise()) {
      im2col(x.data() + n0 * in_img, nb, col_.data());
      col = col_.data();
    }
    // One image: the product lands in the output directly. Several: in a [cout, nb*hw]
    // scratch that is then split per image.
    float* out = nb == 1 ? y.data() + n0 * out_img : chunk_.data();
    gemm(false, false, cout, cols, kdim, 1.0f, w, kdim, col, cols, 0.0f, out, cols);
    if (nb > 1) {
      for (int i = 0; i < nb; ++i) {
        for (int co = 0; co < cout; ++co) {
          std::memcpy(y.data() + (n0 + i) * out_img + int64_t{co} * hw,
                      out + int64_t{co} * cols + int64_t{i} * hw, sizeof(float) * hw);
        }
      }
    }
  }
}

void Conv2d::backward(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  const int n = x.dim(0), cout = spec_.out_channels;
  const int kdim = in_c_ * spec_.kernel * spec_.kernel, hw = out_h_ * out_w_;
  const int64_t in_img = static_cast<int64_t>(in_c_) * in_h_ * in_w_, out_img = int64_t{cout} * hw;
  if (bias_ >= 0) {
    float* db = params_->grad(bias_);
    for (int i = 0; i < n; ++i) {
      for (int co = 0; co < cout; ++co) {
        const float* g = dy.data() + i * out_img + int64_t{co} * hw;
        float s = 0.0f;
        for (int j = 0; j < hw; ++j) s += g[j];
        db[co] += s;
      }
    }
  }
  if (direct()) {
    backward_direct(x, dy, dx);
    return;
  }
  if (dx) {
    dx->resize(x.shape());
    if (!pointwise()) dx->zero();
  }
  const int nb_max = chunk_images(n);
  if (!pointwise()) col_.resize(static_cast<size_t>(kdim) * nb_max * hw);
  if (nb_max > 1) chunk_.resize(static_cast<size_t>(cout) * nb_max * hw);
  const float* w = params_->value(weight_);
  float* dw = params_->grad(weight_);
  for (int n0 = 0; n0 < n; n0 += nb_max) {
    const int nb = std::min(nb_max, n - n0), cols = nb * hw;
    const float* g = dy.data() + n0 * out_img;
    if (nb > 1) {  // gather the chunk's output gradient into [cout, nb*hw]
      for (int i = 0; i < nb; ++i) {
        for (int co = 0; co < cout; ++co) {
          std::memcpy(chunk_.data() + int64_t{co} * cols + int64_t{i} * hw,
                      g + i * out_img + int64_t{co} * hw, sizeof(float) * hw);
        }
      }
      g = chunk_.data();
    }
    const float* col = x.data() + n0 * in_img;
    if (!pointwise()) {
      im2col(x.data() + n0 * in_img, nb, col_.data());
      col = col_.data();
    }
    gemm(false, true, cout, kdim, cols, 1.0f, g, cols, col, cols, 1.0f, dw, kdim);
    if (!dx) continue;
    if (pointwise()) {  // dcol is dx itself
      gemm(true, false, kdim, cols, cout, 1.0f, w, kdim, g, cols, 0.0f,
           dx->data() + n0 * in_img, cols);
    } else {
      gemm(true, false, kdim, cols, cout, 1.0f, w, kdim, g, cols, 0.0f, col_.data(), cols);
      col2im(col_.data(), nb, dx->data() + n0 * in_img);
    }
  }
}

}  // namespace kolo::nn

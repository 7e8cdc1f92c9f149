// Conv2d's direct path: 3x3, stride 1, padding 1, channels in multiples of 4, on the
// kernels of nn/conv3x3.h. Images are padded one at a time (forward, input gradient) or
// a few at a time (weight gradient: enough vectors per pass to amortise the final sums).
#include <algorithm>

#include "nn/conv.h"
#include "nn/conv3x3.h"

namespace kolo::nn {
namespace {

// Vectors per weight-gradient pass we aim for (8x8 planes: 16 images at a time), so the
// final horizontal sums are a small part of the work.
constexpr int kWeightGradVectors = 128;

}  // namespace

bool Conv2d::direct() const {
  return spec_.kernel == 3 && spec_.stride == 1 && spec_.padding == 1 &&
         conv3x3::supports(in_c_, spec_.out_channels);
}

void Conv2d::forward_direct(const Tensor& x, Tensor& y) {
  const int n = x.dim(0), cout = spec_.out_channels;
  const conv3x3::Plane p{in_h_, in_w_};
  const bool narrow = p.wv() != p.w;  // rows not whole vectors: compute wide, then crop
  const int64_t in_img = int64_t{in_c_} * in_h_ * in_w_, out_img = int64_t{cout} * in_h_ * in_w_;
  pad_x_.resize(static_cast<size_t>(in_c_ * p.padded_size()));
  wt_.resize(static_cast<size_t>(cout) * in_c_ * 9);
  if (narrow) wide_.resize(static_cast<size_t>(cout * p.vec_size()));
  conv3x3::forward_weights(params_->value(weight_), cout, in_c_, wt_.data());
  for (int i = 0; i < n; ++i) {
    conv3x3::pad_planes(x.data() + i * in_img, in_c_, p, pad_x_.data());
    float* out = narrow ? wide_.data() : y.data() + i * out_img;
    conv3x3::convolve(pad_x_.data(), in_c_, wt_.data(), cout, p, out);
    if (narrow) conv3x3::narrow_planes(wide_.data(), cout, p, y.data() + i * out_img);
  }
}

void Conv2d::backward_direct(const Tensor& x, const Tensor& dy, Tensor* dx) {
  const int n = x.dim(0), cout = spec_.out_channels;
  const conv3x3::Plane p{in_h_, in_w_};
  const bool narrow = p.wv() != p.w;
  const int64_t in_img = int64_t{in_c_} * in_h_ * in_w_, out_img = int64_t{cout} * in_h_ * in_w_;
  const int64_t xp_img = in_c_ * p.padded_size(), dyv_img = cout * p.vec_size();
  const int group = std::clamp(kWeightGradVectors / static_cast<int>(p.vec_size() / 8), 1,
                               std::max(n, 1));
  pad_x_.resize(static_cast<size_t>(group * xp_img));
  if (narrow) wide_.resize(static_cast<size_t>(std::max(group * dyv_img, in_c_ * p.vec_size())));
  if (dx) {
    dx->resize(x.shape());
    pad_dy_.resize(static_cast<size_t>(cout * p.padded_size()));
    wt_.resize(static_cast<size_t>(cout) * in_c_ * 9);
    conv3x3::flip_weights(params_->value(weight_), cout, in_c_, wt_.data());
  }
  float* dw = params_->grad(weight_);
  for (int n0 = 0; n0 < n; n0 += group) {
    const int nb = std::min(group, n - n0);
    for (int i = 0; i < nb; ++i) {
      conv3x3::pad_planes(x.data() + (n0 + i) * in_img, in_c_, p, pad_x_.data() + i * xp_img);
    }
    // Output gradient in vector rows: the tensor itself, or widened with zero columns.
    const float* g = dy.data() + n0 * out_img;
    if (narrow) {
      for (int i = 0; i < nb; ++i) {
        conv3x3::widen_planes(g + i * out_img, cout, p, wide_.data() + i * dyv_img);
      }
      g = wide_.data();
    }
    conv3x3::weight_gradient(pad_x_.data(), xp_img, g, narrow ? dyv_img : out_img, nb, in_c_,
                             cout, p, dw);
    if (!dx) continue;
    for (int i = 0; i < nb; ++i) {
      conv3x3::pad_planes(dy.data() + (n0 + i) * out_img, cout, p, pad_dy_.data());
      float* d = dx->data() + (n0 + i) * in_img;
      conv3x3::convolve(pad_dy_.data(), cout, wt_.data(), in_c_, p, narrow ? wide_.data() : d);
      if (narrow) conv3x3::narrow_planes(wide_.data(), in_c_, p, d);
    }
  }
}

}  // namespace kolo::nn

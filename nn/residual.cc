// Residual block: both branches, the sum, the final ReLU, and the gradient split.
#include "nn/residual.h"

#include <algorithm>
#include <stdexcept>

namespace kolo::nn {

Dims Residual::setup(const Dims& in, BuildContext& ctx) {
  BuildContext sub = ctx;
  sub.prefix = full_name(ctx) + ".";
  const Dims main_out = main_.setup(in, sub);
  const Dims short_out = shortcut_.empty() ? in : shortcut_.setup(in, sub);
  if (main_out != short_out) {
    throw std::invalid_argument("Residual \"" + full_name(ctx) + "\": main branch gives " +
                                dims_string(main_out) + " but shortcut gives " +
                                dims_string(short_out));
  }
  params_ = ctx.params;
  param_indices_ = main_.param_indices();
  const auto s = shortcut_.param_indices();
  param_indices_.insert(param_indices_.end(), s.begin(), s.end());
  return main_out;
}

void Residual::init(Rng& rng) {
  main_.init(rng);
  shortcut_.init(rng);
}

void Residual::forward(const Tensor& x, Tensor& y, bool train) {
  const Tensor& m = main_.forward(x, train);
  const Tensor& s = shortcut_.empty() ? x : shortcut_.forward(x, train);
  y.resize(m.shape());
  const float* a = m.data();
  const float* b = s.data();
  float* o = y.data();
#pragma omp simd
  for (int64_t i = 0; i < y.size(); ++i) o[i] = std::max(a[i] + b[i], 0.0f);
}

namespace {

// to[i] += from[i]
void add_into(Tensor& to, const Tensor& from) {
  float* t = to.data();
  const float* f = from.data();
#pragma omp simd
  for (int64_t i = 0; i < to.size(); ++i) t[i] += f[i];
}

}  // namespace

void Residual::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  backward_reporting(x, y, dy, dx, {});
}

void Residual::backward_reporting(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx,
                                  const GradReadyFn& ready) {
  dsum_.resize(y.shape());
  const float* out = y.data();
  const float* g = dy.data();
  float* d = dsum_.data();
#pragma omp simd
  for (int64_t i = 0; i < y.size(); ++i) d[i] = out[i] > 0.0f ? g[i] : 0.0f;
  main_.backward(x, dsum_, dx, ready);
  if (shortcut_.empty()) {
    if (dx) add_into(*dx, dsum_);
    return;
  }
  shortcut_.backward(x, dsum_, dx ? &dshort_ : nullptr, ready);
  if (dx) add_into(*dx, dshort_);
}

}  // namespace kolo::nn

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
  for (int64_t i = 0, n = m.size(); i < n; ++i) y[i] = std::max(m[i] + s[i], 0.0f);
}

void Residual::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  dsum_.resize(y.shape());
  for (int64_t i = 0, n = y.size(); i < n; ++i) dsum_[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  main_.backward(x, dsum_, dx);
  if (shortcut_.empty()) {
    if (dx) {
      for (int64_t i = 0, n = dx->size(); i < n; ++i) (*dx)[i] += dsum_[i];
    }
    return;
  }
  shortcut_.backward(x, dsum_, dx ? &dshort_ : nullptr);
  if (dx) {
    for (int64_t i = 0, n = dx->size(); i < n; ++i) (*dx)[i] += dshort_[i];
  }
}

}  // namespace kolo::nn

// GpuResidual: both branches, the fused sum + ReLU, and the gradient split.
#include "nn/gpu/residual.h"

#include <stdexcept>

#include "nn/gpu/kernels.h"

namespace kolo::nn::gpu {

Dims GpuResidual::setup(const Dims& in, GpuBuildContext& ctx) {
  bind(ctx);
  GpuBuildContext sub = ctx;
  sub.prefix = full_name(ctx) + ".";
  const Dims main_out = main_.setup(in, sub);
  const Dims short_out = shortcut_.empty() ? in : shortcut_.setup(in, sub);
  if (main_out != short_out) {
    throw std::invalid_argument("GpuResidual \"" + full_name(ctx) + "\": main branch gives " + dims_string(main_out) +
                                " but shortcut gives " + dims_string(short_out));
  }
  param_indices_ = main_.param_indices();
  const auto s = shortcut_.param_indices();
  param_indices_.insert(param_indices_.end(), s.begin(), s.end());
  return main_out;
}

void GpuResidual::forward(const DeviceTensor& x, DeviceTensor& y, bool train) {
  const DeviceTensor& m = main_.forward(x, train);
  const DeviceTensor& s = shortcut_.empty() ? x : shortcut_.forward(x, train);
  y.resize(m.shape());
  residual_relu(m.data(), s.data(), y.data(), m.size(), gpu_->stream());
}

void GpuResidual::backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy, DeviceTensor* dx) {
  dsum_.resize(y.shape());
  relu_mask(y.data(), dy.data(), dsum_.data(), y.size(), gpu_->stream());
  main_.backward(x, dsum_, dx);
  if (shortcut_.empty()) {
    if (dx) add_inplace(dx->data(), dsum_.data(), dx->size(), gpu_->stream());
    return;
  }
  shortcut_.backward(x, dsum_, dx ? &dshort_ : nullptr);
  if (dx) add_inplace(dx->data(), dshort_.data(), dx->size(), gpu_->stream());
}

}  // namespace kolo::nn::gpu

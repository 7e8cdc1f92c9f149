// GpuLayer registration helpers and GpuChain's forward/backward sequencing.
#include "nn/gpu/layer.h"

#include <stdexcept>

namespace kolo::nn::gpu {

int GpuLayer::add_param(GpuBuildContext& ctx, const std::string& suffix, const Dims& shape) {
  gpu_ = ctx.gpu;
  params_ = ctx.params;
  const int idx = ctx.params->host().add(full_name(ctx) + "." + suffix, shape);
  param_indices_.push_back(idx);
  return idx;
}

int GpuLayer::add_buffer(GpuBuildContext& ctx, const std::string& suffix, const Dims& shape) {
  gpu_ = ctx.gpu;
  buffers_ = ctx.buffers;
  return ctx.buffers->host().add(full_name(ctx) + "." + suffix, shape);
}

Dims GpuChain::setup(const Dims& in, GpuBuildContext& ctx) {
  Dims shape = in;
  for (auto& l : layers_) shape = l->setup(shape, ctx);
  acts_.resize(layers_.size());
  return shape;
}

const DeviceTensor& GpuChain::forward(const DeviceTensor& x, bool train) {
  if (layers_.empty()) throw std::logic_error("GpuChain::forward on an empty chain");
  const DeviceTensor* in = &x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->forward(*in, acts_[i], train);
    in = &acts_[i];
  }
  return acts_.back();
}

void GpuChain::backward(const DeviceTensor& x, const DeviceTensor& dy, DeviceTensor* dx, const GpuLayerDoneFn& done) {
  const DeviceTensor* grad_out = &dy;
  for (size_t i = layers_.size(); i-- > 0;) {
    const DeviceTensor& in = i == 0 ? x : acts_[i - 1];
    DeviceTensor* grad_in = i == 0 ? dx : (grad_out == &grad_a_ ? &grad_b_ : &grad_a_);
    layers_[i]->backward(in, acts_[i], *grad_out, grad_in);
    if (done) done(i, *layers_[i]);
    grad_out = grad_in;
  }
}

std::vector<int> GpuChain::param_indices() const {
  std::vector<int> all;
  for (const auto& l : layers_) all.insert(all.end(), l->param_indices().begin(), l->param_indices().end());
  return all;
}

}  // namespace kolo::nn::gpu

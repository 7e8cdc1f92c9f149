// Layer registration helpers and Chain's forward/backward sequencing.
#include "nn/layer.h"

#include <stdexcept>

namespace kolo::nn {

int Layer::add_param(BuildContext& ctx, const std::string& suffix, const Dims& shape) {
  params_ = ctx.params;
  const int idx = ctx.params->add(full_name(ctx) + "." + suffix, shape);
  param_indices_.push_back(idx);
  return idx;
}

int Layer::add_buffer(BuildContext& ctx, const std::string& suffix, const Dims& shape) {
  buffers_ = ctx.buffers;
  return ctx.buffers->add(full_name(ctx) + "." + suffix, shape);
}

Dims Chain::setup(const Dims& in, BuildContext& ctx) {
  Dims shape = in;
  for (auto& l : layers_) shape = l->setup(shape, ctx);
  acts_.resize(layers_.size());
  return shape;
}

void Chain::init(Rng& rng) {
  for (auto& l : layers_) l->init(rng);
}

const Tensor& Chain::forward(const Tensor& x, bool train) {
  if (layers_.empty()) throw std::logic_error("Chain::forward on an empty chain");
  const Tensor* in = &x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->forward(*in, acts_[i], train);
    in = &acts_[i];
  }
  return acts_.back();
}

void Layer::backward_reporting(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx,
                               const GradReadyFn& ready) {
  backward(x, y, dy, dx);
  if (ready && !param_indices_.empty()) ready(param_indices_);
}

void Chain::backward(const Tensor& x, const Tensor& dy, Tensor* dx, const GradReadyFn& ready) {
  const Tensor* grad_out = &dy;
  for (size_t i = layers_.size(); i-- > 0;) {
    const Tensor& in = i == 0 ? x : acts_[i - 1];
    // Alternate between two scratch tensors so the gradient we read is never the one we
    // write.
    Tensor* grad_in = i == 0 ? dx : (grad_out == &grad_a_ ? &grad_b_ : &grad_a_);
    layers_[i]->backward_reporting(in, acts_[i], *grad_out, grad_in, ready);
    grad_out = grad_in;
  }
}

std::vector<int> Chain::param_indices() const {
  std::vector<int> all;
  for (const auto& l : layers_) {
    all.insert(all.end(), l->param_indices().begin(), l->param_indices().end());
  }
  return all;
}

}  // namespace kolo::nn

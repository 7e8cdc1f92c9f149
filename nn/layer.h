// nn/layer.h — the interface every layer implements, and Chain, a sequence of layers.
//
// Layers have explicit forward and backward passes over whole batches (NCHW or [N, F]).
// Shapes passed to setup() are per sample (without the batch dimension).
//
// Gradient convention: backward() ADDS the parameter gradients of this batch into the
// model's gradient buffer (so several backward passes can be accumulated before one
// optimizer step) and OVERWRITES dx with the gradient of the loss with respect to the
// input. The caller clears gradients (ParamStore::zero_grads) before a new accumulation.
//
// Ownership: a layer owns its scratch tensors; it points into the model's ParamStores,
// which outlive it (both are owned by the Model). Forward outputs live in the Chain.
// Thread safety: none; one training thread drives a model.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/params.h"
#include "nn/random.h"
#include "nn/tensor.h"

namespace kolo::nn {

// Called during backward with the indices (into the model's parameter store) of one
// layer's tensors, right after that layer's backward: those gradients will not change
// again in this pass. Layers with sub-layers (residual blocks) report each sub-layer
// (conv, BatchNorm) separately, as soon as it is done.
using GradReadyFn = std::function<void(const std::vector<int>& param_indices)>;

// What a layer needs while the model is being built.
struct BuildContext {
  ParamStore* params = nullptr;   // trainable tensors (with gradients)
  ParamStore* buffers = nullptr;  // non-trainable state (BatchNorm running statistics)
  Rng* rng = nullptr;             // the model's run-time random source (dropout masks)
  std::string prefix;             // name prefix of the enclosing block, "layer1.0."
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  // Registers parameters and buffers; returns the per-sample output shape for input `in`.
  // Throws std::invalid_argument naming the layer when `in` does not fit.
  virtual Dims setup(const Dims& in, BuildContext& ctx) = 0;
  // Writes initial parameter/buffer values; called once after the stores are finalized.
  virtual void init(Rng& /*rng*/) {}
  virtual void forward(const Tensor& x, Tensor& y, bool train) = 0;
  // x and y are this layer's input and output from the latest forward. dx may be null
  // (first layer of a model: nobody needs the input gradient).
  virtual void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) = 0;
  // backward(), then `ready` for every layer whose gradients are final, as soon as they
  // are. Default: this layer's own tensors (if any) after backward(); containers override
  // it to report their sub-layers one by one. `ready` may be empty.
  virtual void backward_reporting(const Tensor& x, const Tensor& y, const Tensor& dy,
                                  Tensor* dx, const GradReadyFn& ready);
  // Indices into the model's parameter store of every tensor this layer (and its
  // sub-layers) owns, in registration order.
  const std::vector<int>& param_indices() const { return param_indices_; }

 protected:
  // Registers "<prefix><layer name>.<suffix>" in ctx.params and remembers the index.
  int add_param(BuildContext& ctx, const std::string& suffix, const Dims& shape);
  int add_buffer(BuildContext& ctx, const std::string& suffix, const Dims& shape);
  std::string full_name(const BuildContext& ctx) const { return ctx.prefix + name_; }

  ParamStore* params_ = nullptr;
  ParamStore* buffers_ = nullptr;
  std::vector<int> param_indices_;

 private:
  std::string name_;
};


// A sequence of layers with their activations. Used for whole models and for the branches
// of residual blocks.
class Chain {
 public:
  void add(std::unique_ptr<Layer> layer) { layers_.push_back(std::move(layer)); }
  bool empty() const { return layers_.empty(); }
  size_t size() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_.at(i); }
  const Layer& layer(size_t i) const { return *layers_.at(i); }

  Dims setup(const Dims& in, BuildContext& ctx);
  void init(Rng& rng);
  // Returns the last layer's output (owned by the chain, valid until the next forward).
  const Tensor& forward(const Tensor& x, bool train);
  // REQUIRES: forward(x) was the latest forward. Reports finished gradients to `ready`
  // layer by layer (see Layer::backward_reporting).
  void backward(const Tensor& x, const Tensor& dy, Tensor* dx, const GradReadyFn& ready = {});
  // Every parameter index of every layer, in order.
  std::vector<int> param_indices() const;

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Tensor> acts_;  // acts_[i]: output of layer i
  Tensor grad_a_, grad_b_;    // ping-pong input gradients during backward
};

}  // namespace kolo::nn

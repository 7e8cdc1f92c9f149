// nn/model.h — a trainable network: its layers, its parameter and buffer stores, and the
// backward pass that reports each layer's gradients as soon as they are final.
//
// Ownership: the Model owns layers, stores and its run-time Rng; references it returns
// live as long as the Model. A Model is movable (stores are heap-held, so the layers'
// pointers into them survive a move) but not copyable.
// Thread safety: none; one training thread. The GradReadyFn runs on that thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/layer.h"

namespace kolo::nn {

class Model {
 public:
  // Sets up `layers` for per-sample input `input`, allocates the stores and initialises
  // every parameter from `seed` (the same seed gives the same model on every rank).
  Model(std::string arch, Dims input, Chain layers, uint64_t seed);

  const std::string& arch() const { return arch_; }
  const Dims& input_shape() const { return input_; }
  const Dims& output_shape() const { return output_; }

  // x: [N, input...]. Returns logits owned by the model (valid until the next forward).
  const Tensor& forward(const Tensor& x, bool train);
  // Backward of the latest forward(x, true): adds parameter gradients into
  // params().grads() and calls `ready` after each layer with parameters (each conv and
  // BatchNorm inside a residual block separately; see GradReadyFn in nn/layer.h).
  void backward(const Tensor& x, const Tensor& dlogits, const GradReadyFn& ready = {});

  ParamStore& params() { return *params_; }
  const ParamStore& params() const { return *params_; }
  ParamStore& buffers() { return *buffers_; }
  const ParamStore& buffers() const { return *buffers_; }
  // Source of dropout masks; saved in checkpoints.
  Rng& rng() { return *rng_; }
  const Rng& rng() const { return *rng_; }
  size_t num_layers() const { return layers_.size(); }

 private:
  std::string arch_;
  Dims input_, output_;
  std::unique_ptr<ParamStore> params_, buffers_;
  std::unique_ptr<Rng> rng_;
  Chain layers_;
};

}  // namespace kolo::nn

// test/nn/gradcheck.h — numerical gradient checking for layers.
//
// A layer is checked through the scalar L = sum_i y_i * r_i with fixed random r, so every
// output element contributes with a different weight. The analytic gradients come from
// backward(); the numeric ones from central differences on the float inputs/parameters,
// with the loss accumulated in double.
#pragma once

#include <memory>
#include <string>

#include "nn/layer.h"

namespace kolo::nn::testing {

// Owns one layer with its stores, built for per-sample input `in`.
struct LayerHarness {
  LayerHarness(std::unique_ptr<Layer> l, const Dims& input, uint64_t seed = 1);
  ParamStore params{true};
  ParamStore buffers{false};
  Rng rng{123};
  std::unique_ptr<Layer> layer;
  Dims in, out;
};

struct GradCheckResult {
  double max_error = 0.0;  // max over elements of |num-ana| / (atol + rtol*|ana|)
  std::string worst;       // where the worst element is, for the failure message
};

// Checks d L / d x and d L / d every parameter at input x [batch, in...], in training
// mode. The harness Rng is restored before every forward, so dropout draws one mask.
GradCheckResult check_layer_gradients(LayerHarness& h, int batch, double eps = 1e-3,
                                      double rtol = 2e-2, double atol = 2e-3);

}  // namespace kolo::nn::testing

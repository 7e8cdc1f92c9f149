// Central-difference gradient checks against Layer::backward.
#include "gradcheck.h"

#include <cmath>
#include <sstream>
#include <vector>

namespace kolo::nn::testing {

LayerHarness::LayerHarness(std::unique_ptr<Layer> l, const Dims& input, uint64_t seed)
    : layer(std::move(l)), in(input) {
  BuildContext ctx{&params, &buffers, &rng, ""};
  out = layer->setup(input, ctx);
  params.finalize();
  buffers.finalize();
  Rng init(seed);
  layer->init(init);
  // Non-trivial BatchNorm affine parameters and biases: perturb every parameter a bit.
  for (auto& v : params.values()) v += static_cast<float>(0.1 * init.normal());
}

namespace {

double weighted_sum(const Tensor& y, const std::vector<double>& r) {
  double s = 0.0;
  for (int64_t i = 0; i < y.size(); ++i) s += y[i] * r[static_cast<size_t>(i)];
  return s;
}

struct Checker {
  LayerHarness& h;
  Tensor x, y;
  std::vector<double> r;
  std::string rng_state;
  GradCheckResult res;
  double rtol, atol;

  double loss() {
    h.rng.set_state(rng_state);  // dropout draws the same mask every time
    h.layer->forward(x, y, true);
    return weighted_sum(y, r);
  }

  void compare(float* value, double analytic, double eps, const std::string& where) {
    const float saved = *value;
    *value = static_cast<float>(saved + eps);
    const double up = loss();
    *value = static_cast<float>(saved - eps);
    const double down = loss();
    *value = saved;
    const double numeric = (up - down) / (2 * eps);
    const double err = std::abs(numeric - analytic) / (atol + rtol * std::abs(analytic));
    if (err > res.max_error) {
      res.max_error = err;
      std::ostringstream os;
      os << where << ": numeric " << numeric << " analytic " << analytic;
      res.worst = os.str();
    }
  }
};

}  // namespace

GradCheckResult check_layer_gradients(LayerHarness& h, int batch, double eps, double rtol,
                                      double atol) {
  Checker c{h, {}, {}, {}, h.rng.state(), {}, rtol, atol};
  Dims xs = {batch};
  xs.insert(xs.end(), h.in.begin(), h.in.end());
  c.x.resize(xs);
  Rng data(99);
  for (int64_t i = 0; i < c.x.size(); ++i) c.x[i] = static_cast<float>(data.normal());
  c.loss();
  c.r.resize(static_cast<size_t>(c.y.size()));
  for (auto& v : c.r) v = data.normal();
  // Analytic gradients at x: dy = r.
  Tensor dy(c.y.shape()), dx;
  for (int64_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(c.r[static_cast<size_t>(i)]);
  h.params.zero_grads();
  c.loss();
  h.layer->backward(c.x, c.y, dy, &dx);
  const std::vector<float> grads(h.params.grads().begin(), h.params.grads().end());
  for (int64_t i = 0; i < c.x.size(); ++i) {
    c.compare(&c.x[i], dx[i], eps, "input[" + std::to_string(i) + "]");
  }
  for (const auto& p : h.params.infos()) {
    for (size_t j = 0; j < p.size; ++j) {
      c.compare(h.params.values().data() + p.offset + j, grads[p.offset + j], eps,
                p.name + "[" + std::to_string(j) + "]");
    }
  }
  return c.res;
}

}  // namespace kolo::nn::testing

#include "workloads.h"

namespace kolo::bench {

std::vector<GradTensor> resnet50_gradients() {
  std::vector<GradTensor> g;
  auto conv = [&](const std::string& n, int64_t out, int64_t in, int64_t k) {
    g.push_back({n + ".weight", {out, in, k, k}});
  };
  auto bn = [&](const std::string& n, int64_t c) {
    g.push_back({n + ".weight", {c}});
    g.push_back({n + ".bias", {c}});
  };
  conv("conv1", 64, 3, 7);
  bn("bn1", 64);
  const int blocks[4] = {3, 4, 6, 3};
  int64_t in = 64;
  for (int layer = 0; layer < 4; ++layer) {
    const int64_t width = 64LL << layer, out = width * 4;
    for (int b = 0; b < blocks[layer]; ++b) {
      const std::string p = "layer" + std::to_string(layer + 1) + "." + std::to_string(b);
      conv(p + ".conv1", width, in, 1);
      bn(p + ".bn1", width);
      conv(p + ".conv2", width, width, 3);
      bn(p + ".bn2", width);
      conv(p + ".conv3", out, width, 1);
      bn(p + ".bn3", out);
      if (b == 0) {
        conv(p + ".downsample.0", out, in, 1);
        bn(p + ".downsample.1", out);
      }
      in = out;
    }
  }
  g.push_back({"fc.weight", {1000, 2048}});
  g.push_back({"fc.bias", {1000}});
  return g;
}

int64_t total_elements(const std::vector<GradTensor>& set) {
  int64_t n = 0;
  for (const auto& t : set) {
    int64_t e = 1;
    for (int64_t d : t.shape) e *= d;
    n += e;
  }
  return n;
}

}  // namespace kolo::bench

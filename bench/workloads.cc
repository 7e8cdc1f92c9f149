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

std::vector<GradTensor> lenet_gradients() {
  return {{"conv1.weight", {6, 1, 5, 5}}, {"conv1.bias", {6}},     {"conv2.weight", {16, 6, 5, 5}},
          {"conv2.bias", {16}},           {"fc1.weight", {120, 400}}, {"fc1.bias", {120}},
          {"fc2.weight", {84, 120}},      {"fc2.bias", {84}},       {"fc3.weight", {10, 84}},
          {"fc3.bias", {10}}};
}

std::vector<GradTensor> resnet20_gradients() {
  std::vector<GradTensor> g;
  auto conv_bn = [&](const std::string& n, int64_t out, int64_t in) {
    g.push_back({n + ".conv.weight", {out, in, 3, 3}});
    g.push_back({n + ".bn.weight", {out}});
    g.push_back({n + ".bn.bias", {out}});
  };
  conv_bn("stem", 16, 3);
  int64_t in = 16;
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t c = 16LL << stage;
    for (int b = 0; b < 3; ++b) {
      const std::string p = "stage" + std::to_string(stage + 1) + "." + std::to_string(b);
      conv_bn(p + ".a", c, in);
      conv_bn(p + ".b", c, c);
      in = c;
    }
  }
  g.push_back({"fc.weight", {10, 64}});
  g.push_back({"fc.bias", {10}});
  return g;
}

std::vector<GradTensor> bert_base_gradients() {
  const int64_t h = 768, ff = 3072;
  std::vector<GradTensor> g = {{"embeddings.word", {30522, h}},
                               {"embeddings.position", {512, h}},
                               {"embeddings.token_type", {2, h}},
                               {"embeddings.ln.weight", {h}},
                               {"embeddings.ln.bias", {h}}};
  for (int l = 0; l < 12; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    for (const char* m : {"query", "key", "value", "attn_out"}) {
      g.push_back({p + m + ".weight", {h, h}});
      g.push_back({p + m + ".bias", {h}});
    }
    g.push_back({p + "attn_ln.weight", {h}});
    g.push_back({p + "attn_ln.bias", {h}});
    g.push_back({p + "intermediate.weight", {ff, h}});
    g.push_back({p + "intermediate.bias", {ff}});
    g.push_back({p + "output.weight", {h, ff}});
    g.push_back({p + "output.bias", {h}});
    g.push_back({p + "out_ln.weight", {h}});
    g.push_back({p + "out_ln.bias", {h}});
  }
  g.push_back({"pooler.weight", {h, h}});
  g.push_back({"pooler.bias", {h}});
  return g;
}

std::vector<GradTensor> tiny_gradients(int n, int64_t elems) {
  std::vector<GradTensor> g;
  for (int i = 0; i < n; ++i) g.push_back({"tiny." + std::to_string(i), {elems}});
  return g;
}

std::vector<GradTensor> workload_by_name(const std::string& name) {
  if (name == "lenet") return lenet_gradients();
  if (name == "resnet20") return resnet20_gradients();
  if (name == "resnet50") return resnet50_gradients();
  if (name == "bert-base") return bert_base_gradients();
  if (name == "tiny") return tiny_gradients(1000, 1024);
  return {};
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

// nn/architectures.h — the bundled architectures, written once for both trainers
// (internal; see nn/models.h for what each one is).
//
// Each architecture is a function template over a builder policy B that makes the layers:
// the CPU policy lives in nn/models.cc, the GPU one in nn/gpu/model.cc. The templates fix the
// layer names and the order in which layers are added, hence the parameter and buffer layout
// (names, shapes, offsets) that checkpoints, gradient names and the GPU model's layout check
// rely on (pinned by test/nn/model_layout_test.cc).
//
// A builder policy B provides (all static):
//   using Chain    — a sequence of layers with `void add(LayerPtr)`, default-constructible
//                    (empty = identity shortcut) and movable;
//   using LayerPtr — an owning pointer to one layer;
//   LayerPtr conv(name, ConvSpec);
//   void batch_norm(Chain&, bn_name, relu_name)  — adds a BatchNorm2d named bn_name, then a
//        ReLU named relu_name unless relu_name is empty (a builder may fuse the two);
//   LayerPtr relu(name), max_pool(name, kernel, stride, padding), flatten(name),
//            global_avg_pool(name), linear(name, out_features);
//   LayerPtr residual(name, Chain main, Chain shortcut).
//
// Ownership: every function returns freshly built layers owned by the caller.
// Thread safety: stateless; callable from any thread.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "nn/conv.h"

namespace kolo::nn::architectures {

// The names build() knows, in the order the tools list them.
inline std::vector<std::string> names() { return {"lenet", "resnet20", "resnet56", "resnet50"}; }

// names() joined by ", " (for error messages).
inline std::string name_list() {
  std::string known;
  for (const auto& m : names()) known += (known.empty() ? "" : ", ") + m;
  return known;
}

// Convolution (no bias) + BatchNorm, then a ReLU named "<conv_name>.relu" when `relu`.
template <class B>
void conv_bn_relu(typename B::Chain& c, const std::string& conv_name, const std::string& bn_name,
                  int out, int k, int stride, int pad, bool relu) {
  c.add(B::conv(conv_name, ConvSpec{out, k, stride, pad, false}));
  B::batch_norm(c, bn_name, relu ? conv_name + ".relu" : std::string());
}

// The "option B" shortcut: 1x1 convolution + BatchNorm, torchvision's "downsample.0/1".
template <class B>
typename B::Chain projection(int out, int stride) {
  typename B::Chain s;
  conv_bn_relu<B>(s, "downsample.0", "downsample.1", out, 1, stride, 0, false);
  return s;
}

// LeNet-5 with ReLU and max pooling.
template <class B>
typename B::Chain lenet(int num_classes) {
  typename B::Chain c;
  c.add(B::conv("conv1", ConvSpec{6, 5, 1, 2, true}));
  c.add(B::relu("relu1"));
  c.add(B::max_pool("pool1", 2, 2, 0));
  c.add(B::conv("conv2", ConvSpec{16, 5, 1, 0, true}));
  c.add(B::relu("relu2"));
  c.add(B::max_pool("pool2", 2, 2, 0));
  c.add(B::flatten("flatten"));
  c.add(B::linear("fc1", 120));
  c.add(B::relu("relu3"));
  c.add(B::linear("fc2", 84));
  c.add(B::relu("relu4"));
  c.add(B::linear("fc3", num_classes));
  return c;
}

// Basic block: 3x3 conv-bn-relu, 3x3 conv-bn, + shortcut, relu.
template <class B>
typename B::LayerPtr basic_block(const std::string& name, int in, int out, int stride) {
  typename B::Chain m;
  conv_bn_relu<B>(m, "conv1", "bn1", out, 3, stride, 1, true);
  conv_bn_relu<B>(m, "conv2", "bn2", out, 3, 1, 1, false);
  auto s = stride != 1 || in != out ? projection<B>(out, stride) : typename B::Chain{};
  return B::residual(name, std::move(m), std::move(s));
}

// Bottleneck: 1x1 (width), 3x3 (width, stride), 1x1 (4*width), + shortcut, relu.
template <class B>
typename B::LayerPtr bottleneck(const std::string& name, int in, int width, int stride) {
  typename B::Chain m;
  conv_bn_relu<B>(m, "conv1", "bn1", width, 1, 1, 0, true);
  conv_bn_relu<B>(m, "conv2", "bn2", width, 3, stride, 1, true);
  conv_bn_relu<B>(m, "conv3", "bn3", width * 4, 1, 1, 0, false);
  const int out = width * 4;
  auto s = stride != 1 || in != out ? projection<B>(out, stride) : typename B::Chain{};
  return B::residual(name, std::move(m), std::move(s));
}

// Adds the stages of a ResNet after a stem with `base` output channels: stage i (from 0) has
// blocks[i] blocks "layer<i+1>.<b>" of width `base << i` and `expansion` times as many
// output channels, the first block of every stage but the first striding by 2.
template <class B>
void add_stages(typename B::Chain& c, int base, const std::vector<int>& blocks, int expansion,
                typename B::LayerPtr (*block)(const std::string& name, int in, int width,
                                              int stride)) {
  int in = base;
  for (size_t stage = 0; stage < blocks.size(); ++stage) {
    const int width = base << stage;
    for (int b = 0; b < blocks[stage]; ++b) {
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      c.add(block(name, in, width, b == 0 && stage > 0 ? 2 : 1));
      in = width * expansion;
    }
  }
}

// CIFAR ResNet of depth 6n+2; throws std::invalid_argument for another depth.
template <class B>
typename B::Chain cifar_resnet(int depth, int num_classes) {
  if (depth < 8 || (depth - 2) % 6 != 0) {
    throw std::invalid_argument("CIFAR ResNet depth must be 6n+2, got " + std::to_string(depth));
  }
  const int n = (depth - 2) / 6;
  typename B::Chain c;
  conv_bn_relu<B>(c, "conv1", "bn1", 16, 3, 1, 1, true);
  add_stages<B>(c, 16, {n, n, n}, 1, &basic_block<B>);
  c.add(B::global_avg_pool("avgpool"));
  c.add(B::linear("fc", num_classes));
  return c;
}

// torchvision's ResNet-50 (v1.5).
template <class B>
typename B::Chain resnet50(int num_classes) {
  typename B::Chain c;
  conv_bn_relu<B>(c, "conv1", "bn1", 64, 7, 2, 3, true);
  c.add(B::max_pool("maxpool", 3, 2, 1));
  add_stages<B>(c, 64, {3, 4, 6, 3}, 4, &bottleneck<B>);
  c.add(B::global_avg_pool("avgpool"));
  c.add(B::linear("fc", num_classes));
  return c;
}

// The layers of architecture `arch` (one of names()), or nullopt for an unknown name.
template <class B>
std::optional<typename B::Chain> build(const std::string& arch, int num_classes) {
  if (arch == "lenet") return lenet<B>(num_classes);
  if (arch == "resnet20") return cifar_resnet<B>(20, num_classes);
  if (arch == "resnet56") return cifar_resnet<B>(56, num_classes);
  if (arch == "resnet50") return resnet50<B>(num_classes);
  return std::nullopt;
}

}  // namespace kolo::nn::architectures

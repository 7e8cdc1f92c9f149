// Builders for LeNet-5, CIFAR-style ResNets and ResNet-50.
#include "nn/models.h"

#include <stdexcept>

#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/layers.h"
#include "nn/residual.h"

namespace kolo::nn {
namespace {

std::unique_ptr<Layer> conv(const std::string& name, int out, int k, int stride, int pad,
                            bool bias) {
  return std::make_unique<Conv2d>(name, ConvSpec{out, k, stride, pad, bias});
}

void conv_bn_relu(Chain& c, const std::string& conv_name, const std::string& bn_name, int out,
                  int k, int stride, int pad, bool relu) {
  c.add(conv(conv_name, out, k, stride, pad, false));
  // The ReLU is fused into the BatchNorm: one pass over the activations instead of two.
  if (relu) c.add(BatchNorm2d::with_relu(bn_name));
  else c.add(std::make_unique<BatchNorm2d>(bn_name));
}

Chain projection(int out, int stride) {
  Chain s;
  s.add(conv("downsample.0", out, 1, stride, 0, false));
  s.add(std::make_unique<BatchNorm2d>("downsample.1"));
  return s;
}

Chain lenet(int num_classes) {
  Chain c;
  c.add(conv("conv1", 6, 5, 1, 2, true));
  c.add(std::make_unique<ReLU>("relu1"));
  c.add(std::make_unique<MaxPool2d>("pool1", 2, 2));
  c.add(conv("conv2", 16, 5, 1, 0, true));
  c.add(std::make_unique<ReLU>("relu2"));
  c.add(std::make_unique<MaxPool2d>("pool2", 2, 2));
  c.add(std::make_unique<Flatten>("flatten"));
  c.add(std::make_unique<Linear>("fc1", 120));
  c.add(std::make_unique<ReLU>("relu3"));
  c.add(std::make_unique<Linear>("fc2", 84));
  c.add(std::make_unique<ReLU>("relu4"));
  c.add(std::make_unique<Linear>("fc3", num_classes));
  return c;
}

// Basic block: 3x3 conv-bn-relu, 3x3 conv-bn, + shortcut, relu.
std::unique_ptr<Layer> basic_block(const std::string& name, int in, int out, int stride) {
  Chain m;
  conv_bn_relu(m, "conv1", "bn1", out, 3, stride, 1, true);
  conv_bn_relu(m, "conv2", "bn2", out, 3, 1, 1, false);
  Chain s = (stride != 1 || in != out) ? projection(out, stride) : Chain{};
  return std::make_unique<Residual>(name, std::move(m), std::move(s));
}

Chain cifar_resnet(int depth, int num_classes) {
  if (depth < 8 || (depth - 2) % 6 != 0) {
    throw std::invalid_argument("CIFAR ResNet depth must be 6n+2, got " + std::to_string(depth));
  }
  const int n = (depth - 2) / 6;
  Chain c;
  conv_bn_relu(c, "conv1", "bn1", 16, 3, 1, 1, true);
  int in = 16;
  for (int stage = 0; stage < 3; ++stage) {
    const int out = 16 << stage;
    for (int b = 0; b < n; ++b) {
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      c.add(basic_block(name, in, out, b == 0 && stage > 0 ? 2 : 1));
      in = out;
    }
  }
  c.add(std::make_unique<GlobalAvgPool>("avgpool"));
  c.add(std::make_unique<Linear>("fc", num_classes));
  return c;
}

// Bottleneck: 1x1 (width), 3x3 (width, stride), 1x1 (4*width), + shortcut, relu.
std::unique_ptr<Layer> bottleneck(const std::string& name, int in, int width, int stride) {
  Chain m;
  conv_bn_relu(m, "conv1", "bn1", width, 1, 1, 0, true);
  conv_bn_relu(m, "conv2", "bn2", width, 3, stride, 1, true);
  conv_bn_relu(m, "conv3", "bn3", width * 4, 1, 1, 0, false);
  Chain s = (stride != 1 || in != width * 4) ? projection(width * 4, stride) : Chain{};
  return std::make_unique<Residual>(name, std::move(m), std::move(s));
}

Chain resnet50(int num_classes) {
  Chain c;
  conv_bn_relu(c, "conv1", "bn1", 64, 7, 2, 3, true);
  c.add(std::make_unique<MaxPool2d>("maxpool", 3, 2, 1));
  const int blocks[4] = {3, 4, 6, 3};
  int in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int width = 64 << stage;
    for (int b = 0; b < blocks[stage]; ++b) {
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      c.add(bottleneck(name, in, width, b == 0 && stage > 0 ? 2 : 1));
      in = width * 4;
    }
  }
  c.add(std::make_unique<GlobalAvgPool>("avgpool"));
  c.add(std::make_unique<Linear>("fc", num_classes));
  return c;
}

}  // namespace

std::vector<std::string> model_names() { return {"lenet", "resnet20", "resnet56", "resnet50"}; }

std::unique_ptr<Model> make_model(const std::string& arch, const Dims& input, int num_classes,
                                  uint64_t seed) {
  Chain layers;
  if (arch == "lenet") layers = lenet(num_classes);
  else if (arch == "resnet20") layers = cifar_resnet(20, num_classes);
  else if (arch == "resnet56") layers = cifar_resnet(56, num_classes);
  else if (arch == "resnet50") layers = resnet50(num_classes);
  else {
    std::string known;
    for (const auto& m : model_names()) known += (known.empty() ? "" : ", ") + m;
    throw std::invalid_argument("unknown model \"" + arch + "\" (known: " + known + ")");
  }
  return std::make_unique<Model>(arch, input, std::move(layers), seed);
}

}  // namespace kolo::nn

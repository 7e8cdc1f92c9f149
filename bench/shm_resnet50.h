// bench/shm_resnet50.h — the parameter tensors of torchvision's ResNet-50, in the order of
// model.named_parameters(): the gradient set one data-parallel training step allreduces.
// 161 tensors, 25,557,032 values (102.2 MB as fp32); resnet50_parameters() checks both.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace kolo::bench {

struct ParamShape {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

inline std::vector<ParamShape> resnet50_parameters() {
  std::vector<ParamShape> p;
  auto bn = [&p](const std::string& prefix, int64_t c) {
    p.push_back({prefix + ".weight", {c}});
    p.push_back({prefix + ".bias", {c}});
  };
  p.push_back({"conv1.weight", {64, 3, 7, 7}});
  bn("bn1", 64);
  // (blocks, bottleneck width) of layer1..layer4; each block's output is 4 x width.
  const int64_t stages[4][2] = {{3, 64}, {4, 128}, {6, 256}, {3, 512}};
  int64_t in = 64;
  for (int s = 0; s < 4; ++s) {
    const int64_t width = stages[s][1];
    for (int64_t b = 0; b < stages[s][0]; ++b) {
      const std::string blk = "layer" + std::to_string(s + 1) + "." + std::to_string(b);
      p.push_back({blk + ".conv1.weight", {width, in, 1, 1}});
      bn(blk + ".bn1", width);
      p.push_back({blk + ".conv2.weight", {width, width, 3, 3}});
      bn(blk + ".bn2", width);
      p.push_back({blk + ".conv3.weight", {4 * width, width, 1, 1}});
      bn(blk + ".bn3", 4 * width);
      if (b == 0) {  // the first block of each stage changes the channel count
        p.push_back({blk + ".downsample.0.weight", {4 * width, in, 1, 1}});
        bn(blk + ".downsample.1", 4 * width);
      }
      in = 4 * width;
    }
  }
  p.push_back({"fc.weight", {1000, 2048}});
  p.push_back({"fc.bias", {1000}});
  int64_t total = 0;
  for (const ParamShape& x : p) total += x.numel();
  if (p.size() != 161 || total != 25557032) {
    throw std::logic_error("ResNet-50 parameter table is wrong: " + std::to_string(p.size()) +
                           " tensors, " + std::to_string(total) + " values");
  }
  return p;
}

}  // namespace kolo::bench

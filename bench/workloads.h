// bench/workloads.h — gradient sets of real models, as the lists of parameter shapes that a
// training step allreduces (one tensor per parameter, in backward order is not implied).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kolo::bench {

struct GradTensor {
  std::string name;
  std::vector<int64_t> shape;
};

// torchvision's ResNet-50: 53 convolutions (no bias), 53 batch norms (weight, bias), and the
// 2048->1000 classifier: 161 tensors, 25,557,032 values.
std::vector<GradTensor> resnet50_gradients();

int64_t total_elements(const std::vector<GradTensor>& set);

}  // namespace kolo::bench

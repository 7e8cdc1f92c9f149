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
// LeNet-5 on 28x28x1: 10 tensors, 61,706 values.
std::vector<GradTensor> lenet_gradients();
// CIFAR-style ResNet-20 (16/32/64 channels, identity shortcuts): 65 tensors, ~0.27M values.
std::vector<GradTensor> resnet20_gradients();
// BERT-base (uncased vocabulary, 12 layers, hidden 768): 199 tensors, ~110M values.
std::vector<GradTensor> bert_base_gradients();
// `n` tensors of `elems` fp32 values each ("many tiny tensors").
std::vector<GradTensor> tiny_gradients(int n, int64_t elems);
// By name: lenet, resnet20, resnet50, bert-base, tiny (1000 x 4 KB). Empty if unknown.
std::vector<GradTensor> workload_by_name(const std::string& name);

int64_t total_elements(const std::vector<GradTensor>& set);

}  // namespace kolo::bench

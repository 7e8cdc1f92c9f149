// bench/shm_resnet50.h — ResNet-50's gradient set for the shared-memory benchmark, taken from
// bench/workloads.h (the one list of its parameter shapes); resnet50_parameters() checks the
// count (161 tensors) and size (25,557,032 values, 102.2 MB as fp32).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "workloads.h"

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
  for (const GradTensor& g : resnet50_gradients()) p.push_back({g.name, g.shape});
  int64_t total = 0;
  for (const ParamShape& s : p) total += s.numel();
  if (p.size() != 161 || total != 25557032)
    throw std::logic_error("ResNet-50 parameter list is wrong: " + std::to_string(p.size()) + " tensors, " +
                           std::to_string(total) + " values");
  return p;
}

}  // namespace kolo::bench

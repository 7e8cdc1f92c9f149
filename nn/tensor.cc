// Shape helpers and storage management for nn::Tensor.
#include "nn/tensor.h"

#include <algorithm>
#include <stdexcept>

namespace kolo::nn {

std::string dims_string(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(d[i]);
  }
  return s + "]";
}

int64_t dims_product(const Dims& d) {
  int64_t n = 1;
  for (int v : d) {
    if (v < 0) throw std::invalid_argument("negative dimension in shape " + dims_string(d));
    n *= v;
  }
  return n;
}

void Tensor::resize(Dims shape) {
  size_ = dims_product(shape);
  shape_ = std::move(shape);
  if (data_.size() < static_cast<size_t>(size_)) data_.resize(static_cast<size_t>(size_));
}

void Tensor::zero() { std::fill(data_.begin(), data_.begin() + size_, 0.0f); }

}  // namespace kolo::nn

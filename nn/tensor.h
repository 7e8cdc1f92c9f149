// nn/tensor.h — the trainer's activation tensor: contiguous fp32, NCHW (or [N, features]).
//
// A Tensor owns its storage. resize() keeps the allocation when the element count does not
// grow, so layers that resize their outputs every batch allocate only on the first one.
// Thread safety: a plain value; no internal synchronisation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kolo::nn {

using Dims = std::vector<int>;

// "[64,1,28,28]"
std::string dims_string(const Dims& d);
int64_t dims_product(const Dims& d);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Dims shape) { resize(std::move(shape)); }

  // Sets the shape; contents are unspecified afterwards (not zeroed).
  void resize(Dims shape);
  void zero();

  const Dims& shape() const { return shape_; }
  int dim(size_t i) const { return shape_.at(i); }
  size_t rank() const { return shape_.size(); }
  int64_t size() const { return size_; }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  float& operator[](int64_t i) { return data_[static_cast<size_t>(i)]; }
  float operator[](int64_t i) const { return data_[static_cast<size_t>(i)]; }
  // Elements per sample: size() / shape[0].
  int64_t sample_size() const { return shape_.empty() || shape_[0] == 0 ? 0 : size_ / shape_[0]; }

 private:
  Dims shape_;
  int64_t size_ = 0;
  std::vector<float> data_;
};

}  // namespace kolo::nn

// nn/params.h — one contiguous buffer for all of a model's parameters, one for their
// gradients, and a view (name, shape, offset) per tensor.
//
// Why one buffer: the optimizer updates everything in one loop, a checkpoint is one write,
// and a collective over "all parameters" (broadcast at start) is one tensor. Per-tensor
// views still give allreduce one named tensor per layer parameter so communication can
// start as soon as that layer's backward has finished.
//
// Life cycle: layers add() their tensors while the model is built, then finalize()
// allocates both buffers (values zeroed) and nothing can be added any more. Pointers
// returned by value()/grad() stay valid until the store is destroyed (or, for gradients,
// until place_grads()).
// Ownership: the store owns both buffers (gradients: unless placed in the caller's memory);
// the Model owns the store.
// Thread safety: none; the training thread uses it (kolo's coordinator only touches the
// gradient memory handed to an allreduce until that handle completes).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "nn/tensor.h"

namespace kolo::nn {

struct ParamInfo {
  std::string name;   // "layer1.0.conv1.weight"
  Dims shape;         // PyTorch layout: conv [out,in,kh,kw], linear [out,in]
  size_t offset = 0;  // into values()/grads(), in floats
  size_t size = 0;    // elements
};

class ParamStore {
 public:
  // with_grads=false: a store of buffers (BatchNorm running statistics) without gradients.
  explicit ParamStore(bool with_grads = true) : with_grads_(with_grads) {}
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  // REQUIRES: !finalized(); name not used before. Returns the tensor's index.
  int add(const std::string& name, const Dims& shape);
  void finalize();
  bool finalized() const { return finalized_; }

  size_t count() const { return infos_.size(); }
  const std::vector<ParamInfo>& infos() const { return infos_; }
  const ParamInfo& info(int i) const { return infos_.at(static_cast<size_t>(i)); }
  // Index of the tensor called `name`; throws std::out_of_range naming it if absent.
  int index_of(const std::string& name) const;

  float* value(int i) { return values_.data() + info(i).offset; }
  const float* value(int i) const { return values_.data() + info(i).offset; }
  float* grad(int i) { return grad_data_ + info(i).offset; }

  std::span<float> values() { return values_; }
  std::span<const float> values() const { return values_; }
  std::span<float> grads() { return {grad_data_, grad_data_ == nullptr ? 0 : values_.size()}; }
  size_t total_size() const { return values_.size(); }
  void zero_grads();
  // Moves the gradients into `memory` (total_size() floats, not owned; e.g. kolo's shared
  // memory for zero-copy allreduce), copying their current values. Earlier grad() pointers
  // become invalid. REQUIRES: finalized(), a store with gradients, memory outlives the store.
  void place_grads(float* memory);

 private:
  bool with_grads_;
  bool finalized_ = false;
  size_t next_offset_ = 0;
  std::vector<ParamInfo> infos_;
  std::vector<float> values_;
  std::vector<float> grads_;     // empty once placed elsewhere
  float* grad_data_ = nullptr;   // grads_.data() or the placed memory
};

}  // namespace kolo::nn

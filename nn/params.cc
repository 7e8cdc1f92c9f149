// ParamStore: registration, then one allocation for values and one for gradients.
#include "nn/params.h"

#include <algorithm>
#include <stdexcept>

namespace kolo::nn {

int ParamStore::add(const std::string& name, const Dims& shape) {
  if (finalized_) throw std::logic_error("ParamStore::add(\"" + name + "\") after finalize()");
  for (const auto& p : infos_) {
    if (p.name == name) throw std::logic_error("ParamStore: duplicate tensor name \"" + name + "\"");
  }
  ParamInfo info{name, shape, next_offset_, static_cast<size_t>(dims_product(shape))};
  // Keep every tensor 16-float (64-byte) aligned relative to the buffer start, so views
  // start on cache lines when the buffer does.
  next_offset_ += (info.size + 15) / 16 * 16;
  infos_.push_back(std::move(info));
  return static_cast<int>(infos_.size() - 1);
}

void ParamStore::finalize() {
  if (finalized_) return;
  values_.assign(next_offset_, 0.0f);
  if (with_grads_) {
    grads_.assign(next_offset_, 0.0f);
    grad_data_ = grads_.data();
  }
  finalized_ = true;
}

void ParamStore::place_grads(float* memory) {
  if (!finalized_ || !with_grads_) throw std::logic_error("ParamStore::place_grads: no gradients to place");
  if (grad_data_ != nullptr) std::copy(grad_data_, grad_data_ + values_.size(), memory);
  grad_data_ = memory;
  grads_ = std::vector<float>();
}

int ParamStore::index_of(const std::string& name) const {
  for (size_t i = 0; i < infos_.size(); ++i) {
    if (infos_[i].name == name) return static_cast<int>(i);
  }
  throw std::out_of_range("no parameter tensor named \"" + name + "\"");
}

void ParamStore::zero_grads() {
  auto g = grads();
  std::fill(g.begin(), g.end(), 0.0f);
}

}  // namespace kolo::nn

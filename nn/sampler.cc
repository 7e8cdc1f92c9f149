// ShardedSampler: per-epoch permutation, global batches, per-rank slices.
#include "nn/sampler.h"

#include <cmath>
#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "nn/random.h"

namespace kolo::nn {

ShardedSampler::ShardedSampler(int64_t dataset_size, int rank, int size, int batch_size,
                               uint64_t seed, bool shuffle, const std::vector<double>& weights,
                               bool keep_remainder)
    : n_(dataset_size), rank_(rank), size_(size), seed_(seed), shuffle_(shuffle) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw std::invalid_argument("sampler: rank " + std::to_string(rank) + " of " +
                                std::to_string(size) + " is not a valid position");
  }
  if (batch_size < 1) throw std::invalid_argument("sampler: batch size must be >= 1");
  if (!weights.empty() && static_cast<int>(weights.size()) != size) {
    throw std::invalid_argument("sampler: " + std::to_string(weights.size()) +
                                " rank weights given for " + std::to_string(size) + " ranks");
  }
  const int total = batch_size * size;
  if (weights.empty()) {
    sizes_.assign(static_cast<size_t>(size), batch_size);
  } else {
    const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
    for (double w : weights) {
      if (!(w > 0.0)) throw std::invalid_argument("sampler: rank weights must be positive");
      sizes_.push_back(std::max(1, static_cast<int>(std::lround(total * w / sum))));
    }
  }
  offsets_.resize(sizes_.size());
  std::exclusive_scan(sizes_.begin(), sizes_.end(), offsets_.begin(), 0);
  global_ = std::accumulate(sizes_.begin(), sizes_.end(), 0);
  batches_ = n_ / global_;
  if (batches_ == 0) {
    throw std::invalid_argument("sampler: data set of " + std::to_string(n_) +
                                " samples is smaller than one global batch of " +
                                std::to_string(global_));
  }
  if (keep_remainder) {
    remainder_ = n_ - batches_ * global_;
    const int64_t lo = offsets_[static_cast<size_t>(rank_)], hi = lo + sizes_[static_cast<size_t>(rank_)];
    remainder_begin_ = remainder_ * lo / global_;
    remainder_end_ = remainder_ * hi / global_;
  }
  set_epoch(0);
}

void ShardedSampler::set_epoch(int64_t epoch) {
  perm_.resize(static_cast<size_t>(n_));
  std::iota(perm_.begin(), perm_.end(), 0);
  if (!shuffle_) return;
  // Fisher-Yates with our own Rng: identical on every rank and every standard library.
  Rng rng(seed_ * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(epoch) + 1);
  for (int64_t i = n_ - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
    std::swap(perm_[static_cast<size_t>(i)], perm_[static_cast<size_t>(j)]);
  }
}

double ShardedSampler::local_weight() const {
  return static_cast<double>(local_batch_size()) * size_ / global_;
}

std::vector<int64_t> ShardedSampler::batch(int64_t b) const {
  if (b < 0 || b >= batches_per_epoch()) {
    throw std::out_of_range("sampler: batch " + std::to_string(b) + " outside [0," +
                            std::to_string(batches_per_epoch()) + ")");
  }
  if (b == batches_) {
    const int64_t start = batches_ * global_;
    return {perm_.begin() + start + remainder_begin_, perm_.begin() + start + remainder_end_};
  }
  const int64_t start = b * global_ + offsets_[static_cast<size_t>(rank_)];
  return {perm_.begin() + start, perm_.begin() + start + local_batch_size()};
}

void eval_shard(int64_t n, int rank, int size, int64_t* begin, int64_t* end) {
  *begin = n * rank / size;
  *end = n * (rank + 1) / size;
}

}  // namespace kolo::nn

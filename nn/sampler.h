// nn/sampler.h — which samples each rank trains on, batch by batch.
//
// Every epoch, all ranks draw the same permutation of the data set (seeded by seed and
// epoch). The permutation is cut into global batches of G = sum of the ranks' batch sizes;
// rank r takes its contiguous slice of each global batch. So step s of an N-rank run with
// batch b per rank sees exactly the samples of step s of a 1-rank run with batch N*b — the
// property that makes distributed training equal to large-batch training.
//
// Remainder: the last (dataset size mod G) samples of each epoch's permutation are skipped
// in that epoch, so every rank runs the same number of batches (no rank waits on an
// allreduce the others never start). The permutation changes every epoch, so no sample is
// left out systematically.
//
// Or (keep_remainder, the trainer's --remainder join): the remainder becomes one more,
// smaller batch, cut among the ranks in proportion to their batch sizes. A rank whose cut
// is empty has one batch fewer than the others (batches_per_epoch() differs by rank); the
// trainer then calls kolo::join() at the end of each epoch, so the ranks that ran out take
// part in the others' last allreduce with zeros, averaged over the ranks that contributed.
//
// Unequal machines: weights give rank r a batch of about G * w_r / sum(w) (each >= 1);
// the DistributedOptimizer then weights each rank's gradient by its share (local_weight())
// so the average is still the mean over the global batch.
// Thread safety: const methods may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kolo::nn {

class ShardedSampler {
 public:
  // batch_size: per rank (when weights are empty) — the global batch is batch_size*size.
  // weights: empty, or one positive value per rank.
  ShardedSampler(int64_t dataset_size, int rank, int size, int batch_size, uint64_t seed,
                 bool shuffle = true, const std::vector<double>& weights = {}, bool keep_remainder = false);

  void set_epoch(int64_t epoch);
  // This rank's batches per epoch (with keep_remainder, one more where its cut of the
  // remainder is not empty).
  int64_t batches_per_epoch() const { return batches_ + (remainder_end_ > remainder_begin_ ? 1 : 0); }
  // The most batches any rank has per epoch.
  int64_t max_batches_per_epoch() const { return batches_ + (remainder_ > 0 ? 1 : 0); }
  int local_batch_size() const { return sizes_[static_cast<size_t>(rank_)]; }
  int global_batch_size() const { return global_; }
  // This rank's share of the global batch times the number of ranks: the factor that
  // turns an average of per-rank mean gradients into the global mean (1 when equal).
  double local_weight() const;
  // Dataset indices of this rank's batch `b` of the current epoch (b < batches_per_epoch()).
  std::vector<int64_t> batch(int64_t b) const;

 private:
  int64_t n_;
  int rank_, size_;
  uint64_t seed_;
  bool shuffle_;
  std::vector<int> sizes_, offsets_;  // per rank: batch size, offset in the global batch
  int global_ = 0;
  int64_t batches_ = 0;  // full global batches
  int64_t remainder_ = 0;                            // keep_remainder: samples of the last batch
  int64_t remainder_begin_ = 0, remainder_end_ = 0;  // this rank's cut of them
  std::vector<int64_t> perm_;
};

// This rank's contiguous shard [begin, end) of `n` evaluation samples (sizes differ by at
// most one; every sample belongs to exactly one rank).
void eval_shard(int64_t n, int rank, int size, int64_t* begin, int64_t* end);

}  // namespace kolo::nn

// examples/kolo_train/kv_path.h — kolo-train's step through a kolo::KVStore
// (--kv-store local|dist_sync|dist_async; "allreduce", the default, is the
// DistributedOptimizer path and needs none of this).
//
// One key per parameter tensor (its index in the model's ParamStore). Worker 0's initial
// weights are the store's; the optimizer (sgd with momentum and weight decay, MXNet's rule)
// runs where the weights live, with rescale_grad = 1/workers, so a dist_sync update uses the
// mean gradient over the global batch — as the allreduce path does — and a dist_async one the
// same step per sample (MXNet's Module scales async pushes by 1/batch, a full step each: worse
// here, docs/kvstore.md). --kv-lookahead sets KVOptimizer::lookahead (dist_async). A step: the whole
// backward pass, then push every gradient and pull every weight (no overlap with the
// backward pass). --schedule constant|cosine and --warmup-epochs run on the servers
// (KVOptimizer's schedule, by update count; docs/kvstore.md).
// Server ranks serve() until the workers are done. Workers must not call kolo's collectives
// (the servers never join them): metrics go through sum_over_workers().
// Thread safety: the training thread.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kolo/kvstore.h"
#include "nn/params.h"

namespace kolo::train {

struct TrainOptions;

class KvPath {
 public:
  // Collective over all ranks. Throws std::invalid_argument for options the path lacks.
  explicit KvPath(const TrainOptions& o);
  bool is_server() const { return kv_->is_server(); }
  void serve() { kv_->run_server(); }
  int rank() const { return kv_->rank(); }
  int workers() const { return kv_->num_workers(); }
  // Workers: the keys from the model's parameters (worker 0's values), and the optimizer,
  // whose schedule counts `steps_per_epoch` steps of every worker per epoch.
  void start(nn::ParamStore& params, int64_t steps_per_epoch);
  // Workers: push the gradients, pull the weights; returns the seconds it took.
  double step(nn::ParamStore& params);
  void sum_over_workers(std::span<double> v) { kv_->sum_over_workers(v); }
  void close() { kv_->close(); }

 private:
  std::vector<TensorView> views(nn::ParamStore& params, bool grads) const;
  const TrainOptions& o_;
  std::unique_ptr<KVStore> kv_;
  std::vector<int> keys_;
};

}  // namespace kolo::train

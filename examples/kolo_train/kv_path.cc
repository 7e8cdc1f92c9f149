// kolo-train's KVStore step: examples/kolo_train/kv_path.h.
#include "examples/kolo_train/kv_path.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "examples/kolo_train/trainer.h"
#include "kolo/runtime.h"

namespace kolo::train {

KvPath::KvPath(const TrainOptions& o) : o_(o) {
  if (o.device != "cpu" || o.gradients != "kolo" || o.backward_passes_per_step != 1 || o.fp16 ||
      o.remainder != "drop" || !o.rank_weights.empty() || !o.checkpoint_dir.empty() || o.resume)
    throw std::invalid_argument("--kv-store " + o.kv_store +
                                " takes --device cpu, one backward pass per step, no --fp16-allreduce, "
                                "--remainder drop, no --rank-weights and no checkpoints");
  if (o.optimizer != "sgd" || o.nesterov || (o.schedule != "constant" && o.schedule != "cosine") || o.scale_lr)
    throw std::invalid_argument("--kv-store " + o.kv_store +
                                ": the store runs MXNet's sgd (momentum, weight decay) with a constant or cosine rate "
                                "and warm-up: use --optimizer sgd --schedule constant|cosine, without "
                                "--nesterov/--scale-lr");
  if (o.kv_store == "local" && kolo::size() != 1)
    throw std::invalid_argument("--kv-store local trains in one process; with " + std::to_string(kolo::size()) +
                                " ranks use allreduce, dist_sync or dist_async");
  kv_ = KVStore::create(o.kv_store);
}

std::vector<TensorView> KvPath::views(nn::ParamStore& params, bool grads) const {
  std::vector<TensorView> v;
  for (size_t i = 0; i < params.count(); ++i) {
    const int idx = static_cast<int>(i);
    v.push_back(TensorView::of(grads ? params.grad(idx) : params.value(idx),
                               Shape{static_cast<int64_t>(params.info(idx).size)}));
  }
  return v;
}

void KvPath::start(nn::ParamStore& params, int64_t steps_per_epoch) {
  keys_.clear();
  for (size_t i = 0; i < params.count(); ++i) keys_.push_back(static_cast<int>(i));
  kv_->init(keys_, views(params, false));
  KVOptimizer opt;
  opt.kind = "sgd";
  opt.learning_rate = o_.lr;
  opt.momentum = o_.momentum;
  opt.wd = o_.weight_decay;
  opt.rescale_grad = 1.0 / kv_->num_workers();
  opt.lookahead = o_.kv_lookahead;
  // The schedule runs on the servers by update count: in dist_async every worker's push is
  // an update, so a step of the workers is num_workers() updates of each key.
  const double per_epoch =
      static_cast<double>(steps_per_epoch) * (o_.kv_store == "dist_async" ? kv_->num_workers() : 1);
  opt.lr_schedule = o_.schedule;
  opt.warmup_updates = std::llround(o_.warmup_epochs * per_epoch);
  opt.warmup_begin_lr = 0.1 * o_.lr;  // the allreduce path's warm-up starts at 0.1 of the rate too
  opt.max_updates = std::max(std::llround(o_.epochs * per_epoch), static_cast<long long>(opt.warmup_updates) + 1);
  kv_->set_optimizer(opt);
  kv_->pull(keys_, views(params, false));  // every worker starts from worker 0's weights
}

double KvPath::step(nn::ParamStore& params) {
  const auto t0 = std::chrono::steady_clock::now();
  kv_->push(keys_, views(params, true));
  kv_->pull(keys_, views(params, false));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace kolo::train

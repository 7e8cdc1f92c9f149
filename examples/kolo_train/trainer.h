// examples/kolo_train/trainer.h — the training run behind kolo-train: data, model,
// distributed optimizer, progress lines, evaluation across ranks, checkpoints, metrics.
//
// REQUIRES: kolo::init() was called. Every rank calls run_training() with the same
// options (the data set, model and schedule must agree across ranks).
// Thread safety: one call per process.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace kolo::train {

// What one training step cost, for benchmarks (kolo-bench-train). `seconds` covers the
// whole step on this rank (batch, forward, backward, step); `allreduce_wait_seconds` is
// the part spent in DistributedOptimizer::step() waiting for allreduces — communication
// the backward pass did not hide.
struct StepTiming {
  int epoch = 0;
  int64_t batch = 0;
  int64_t images = 0;  // this rank's
  double seconds = 0.0;
  double allreduce_wait_seconds = 0.0;
  double loss = 0.0;
};

struct TrainOptions {
  std::string model = "lenet";
  std::string dataset = "fashion-mnist";
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int epochs = 15;
  int batch_size = 64;  // per rank
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 5e-4;
  double warmup_epochs = 1.0;
  std::string schedule = "cosine";
  std::string optimizer = "sgd";
  bool nesterov = false;
  bool scale_lr = false;  // linear scaling by the number of ranks
  int threads = 1;
  std::string checkpoint_dir;
  bool resume = false;
  uint64_t seed = 42;
  std::string metrics_json;
  int log_interval = 50;
  int backward_passes_per_step = 1;
  bool fp16 = false;
  std::string augment = "auto";  // auto, off, flip, crop-flip (see make_augment)
  std::vector<double> rank_weights;
  int64_t max_batches = 0;       // per epoch; 0: all (throughput runs on synthetic data)
  int64_t synthetic_size = 10240;
  bool evaluate = true;
  std::string device = "cpu";  // cpu | gpu (GPU local_rank % GPUs; docs/gpu.md)
  bool verbose = true;                           // rank 0's progress lines
  std::function<void(const StepTiming&)> on_step;  // every rank, after each step
  // How gradients are averaged (CPU only): "kolo" (DistributedOptimizer: per-layer
  // allreduces overlapping the backward pass) or "mpi" — the baseline of benchmarks: after
  // the whole backward pass, one blocking MPI_Allreduce of all gradients on MPI_COMM_WORLD,
  // then the same optimizer update. kolo's coordinator still runs, idle.
  std::string gradients = "kolo";
  // The samples left after the last full global batch of an epoch: "drop" them (every rank
  // runs the same number of batches), or "join": one more, smaller batch cut among the
  // ranks; a rank whose cut is empty calls kolo::join() one batch earlier, and every rank
  // joins at the end of the epoch (docs/trainer.md).
  std::string remainder = "drop";
  // Where the weights live and who applies the update (docs/kvstore.md): "allreduce" (the
  // DistributedOptimizer path above, every rank a worker), "local" (one rank, through a
  // KVStore), "dist_sync" / "dist_async" (the last KOLO_NUM_SERVERS ranks are parameter
  // servers that run the optimizer; examples/kolo_train/kv_path.h).
  std::string kv_store = "allreduce";
  bool kv_lookahead = false;  // dist_async: KVOptimizer::lookahead
};

// Runs the whole training and returns the metrics (also written to metrics_json by rank 0
// when set). Throws std::exception subclasses with a message naming what failed.
nlohmann::json run_training(const TrainOptions& opt);

}  // namespace kolo::train

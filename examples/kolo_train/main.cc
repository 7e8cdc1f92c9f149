// kolo-train: the bundled CPU trainer. `mpirun -np 2 kolo-train` trains LeNet-5 on
// Fashion-MNIST with defaults that reach >= 0.91 test accuracy.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "examples/kolo_train/trainer.h"
#include "kolo/kolo.h"

namespace {

void add_flags(CLI::App& app, kolo::train::TrainOptions& o) {
  app.add_option("--model", o.model, "lenet | resnet20 | resnet56 | resnet50")->capture_default_str();
  app.add_option("--dataset", o.dataset, "fashion-mnist | mnist | cifar10 | synthetic")->capture_default_str();
  app.add_option("--data-dir", o.data_dir, "folder with the data set's files")->capture_default_str();
  app.add_option("--epochs", o.epochs)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--batch-size", o.batch_size, "per rank")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--lr", o.lr, "base learning rate")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--momentum", o.momentum)->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--wd", o.weight_decay, "weight decay")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--warmup-epochs", o.warmup_epochs)->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--schedule", o.schedule, "constant | step | cosine")->capture_default_str();
  app.add_option("--optimizer", o.optimizer, "sgd | adam | adamw")->capture_default_str();
  app.add_flag("--nesterov", o.nesterov, "Nesterov momentum (sgd)");
  app.add_flag("--scale-lr", o.scale_lr, "multiply the learning rate by the number of ranks");
  app.add_option("--threads", o.threads, "Eigen threads per rank")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--checkpoint-dir", o.checkpoint_dir, "write checkpoint.kolo here after every epoch");
  app.add_flag("--resume", o.resume, "continue from --checkpoint-dir/checkpoint.kolo");
  app.add_option("--seed", o.seed)->capture_default_str();
  app.add_option("--metrics-json", o.metrics_json, "write final metrics as JSON here ('-': stdout)");
  app.add_option("--log-interval", o.log_interval, "batches per progress line")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--backward-passes-per-step", o.backward_passes_per_step)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_flag("--fp16-allreduce", o.fp16, "compress gradients to float16 for the allreduce");
  app.add_option("--augment", o.augment, "auto | off | flip | crop-flip")->capture_default_str();
  app.add_option("--rank-weights", o.rank_weights, "relative speed of each rank (unequal batches)");
  app.add_option("--max-batches", o.max_batches, "stop each epoch after this many batches (0: all)")->capture_default_str();
  app.add_option("--remainder", o.remainder, "drop | join: what happens to the samples after the last full global batch")
      ->capture_default_str();
  app.add_option("--synthetic-size", o.synthetic_size, "samples of the synthetic data set")->capture_default_str();
  app.add_flag("!--no-eval", o.evaluate, "skip test-set evaluation");
  app.add_option("--kv-store", o.kv_store,
                 "allreduce | local | dist_sync | dist_async: dist_* make the last KOLO_NUM_SERVERS ranks parameter "
                 "servers (docs/kvstore.md)")
      ->capture_default_str();
  app.add_flag("--kv-lookahead", o.kv_lookahead,
               "dist_async: pulls return the weights plus momentum times the server's momentum (less staleness; "
               "docs/kvstore.md)");
  app.add_option("--device", o.device, "cpu | gpu (GPU: local rank % visible GPUs)")->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kolo-train: data-parallel training of LeNet/ResNet on CPU"};
  kolo::train::TrainOptions opts;
  add_flags(app, opts);
  CLI11_PARSE(app, argc, argv);
  try {
    kolo::init(&argc, &argv);
    kolo::train::run_training(opts);
    kolo::shutdown();
  } catch (const std::exception& e) {
    if (kolo::is_initialized())
      std::fprintf(stderr, "kolo-train (rank %d): error: %s\n", kolo::rank(), e.what());
    else  // no rank yet: kolo::init refused (a KOLO_* value, MPI) before it knew one
      std::fprintf(stderr, "kolo-train (before kolo::init completed): error: %s\n", e.what());
    return 1;
  }
  return 0;
}

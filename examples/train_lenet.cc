// train_lenet: distributed LeNet-5 on Fashion-MNIST in about a hundred lines.
//
//   mpirun -np 2 build/examples/train_lenet [data-dir] [epochs]
//
// Every rank holds the whole model and trains on its own slice of each global batch; after
// each layer's backward the DistributedOptimizer starts averaging that layer's gradients
// across ranks while the backward pass continues. (kolo-train is the full-featured version.)
#include <cstdio>
#include <string>

#include "kolo/kolo.h"
#include "nn/data.h"
#include "nn/loss.h"
#include "nn/models.h"
#include "nn/sampler.h"
#include "optimizer/distributed_optimizer.h"
#include "optimizer/schedule.h"

namespace {

// Fraction of the test set classified correctly, over all ranks' shards together.
double test_accuracy(kolo::nn::Model& model, const kolo::nn::Dataset& test) {
  int64_t begin, end;
  kolo::nn::eval_shard(static_cast<int64_t>(test.size()), kolo::rank(), kolo::size(), &begin, &end);
  kolo::nn::Tensor x;
  std::vector<int32_t> y;
  kolo::nn::Rng no_augment;
  double counts[2] = {0, 0};  // correct, seen
  for (int64_t b = begin; b < end; b += 1000) {
    std::vector<int64_t> idx;
    for (int64_t i = b; i < std::min(end, b + 1000); ++i) idx.push_back(i);
    kolo::nn::gather_batch(test, idx, {}, no_augment, x, y);
    counts[0] += kolo::nn::count_correct(model.forward(x, /*train=*/false), y.data());
    counts[1] += static_cast<double>(idx.size());
  }
  kolo::allreduce(kolo::TensorView::of(counts, {2}), "test.counts", {kolo::ReduceOp::kSum});
  return counts[0] / counts[1];
}

}  // namespace

int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  const std::string dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  const int epochs = argc > 2 ? std::stoi(argv[2]) : 10;
  const bool root = kolo::rank() == 0;

  // 1. Data: every rank loads the files; the sampler decides who trains on what.
  kolo::nn::Dataset train = kolo::nn::load_mnist_dir(dir, true);
  kolo::nn::Dataset test = kolo::nn::load_mnist_dir(dir, false);
  const auto stats = kolo::nn::channel_stats(train);
  kolo::nn::normalise(train, stats);
  kolo::nn::normalise(test, stats);
  const int batch = 64;  // per rank
  kolo::nn::ShardedSampler sampler(static_cast<int64_t>(train.size()), kolo::rank(),
                                   kolo::size(), batch, /*seed=*/1);

  // 2. Model and optimizer; rank 0's initial parameters are copied everywhere.
  auto model = kolo::nn::make_model("lenet", train.sample_shape, 10, /*seed=*/1);
  kolo::SgdOptions sgd{.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4};
  kolo::DistributedOptimizer opt(std::make_unique<kolo::SGD>(model->params(), sgd), {});
  kolo::broadcast_model(*model, /*root=*/0);
  kolo::broadcast_optimizer_state(opt.inner(), /*root=*/0);
  kolo::LrSchedule schedule;  // one epoch of linear warm-up, then cosine decay
  schedule.base_lr = 0.05;
  schedule.warmup_epochs = 1;
  schedule.kind = kolo::LrSchedule::Kind::kCosine;
  schedule.total_epochs = epochs;

  // 3. Train: forward, loss, backward (allreduce starts per layer), step.
  kolo::nn::Tensor x;
  std::vector<int32_t> y;
  kolo::nn::Rng rng(7);
  kolo::nn::SoftmaxCrossEntropy loss;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    sampler.set_epoch(epoch);
    const int64_t batches = sampler.batches_per_epoch();
    double loss_sum = 0;
    for (int64_t b = 0; b < batches; ++b) {
      opt.set_lr(schedule.rate(epoch + static_cast<double>(b) / batches));
      kolo::nn::gather_batch(train, sampler.batch(b), {}, rng, x, y);
      loss_sum += loss.forward(model->forward(x, /*train=*/true), y.data()).loss;
      model->backward(x, loss.grad(), opt.hook());
      if (opt.step()) opt.zero_grad();
    }
    const double acc = test_accuracy(*model, test);
    if (root) std::printf("epoch %d: train loss %.4f, test accuracy %.4f\n", epoch,
                          loss_sum / batches, acc);
  }
  kolo::shutdown();
  return 0;
}

// Data-parallel training of a LibTorch model with kolo::torch, Horovod style:
//
//   mpirun -np 2 build/examples/kolo-torch-fashion-mnist --epochs 2
//
// Every rank builds the same model, takes rank 0's parameters (broadcast_parameters), wraps
// its optimizer in kolo::torch::DistributedOptimizer and trains on its shard of
// Fashion-MNIST (Debian's dataset-fashion-mnist; --data names another IDX directory). Each
// gradient is averaged across ranks while backward still runs, so np ranks with --batch b
// follow one process with batch np*b. Loss and accuracy are averaged over the ranks.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include "kolo/kolo.h"
#include "kolo/torch.h"
#include "nn/data.h"  // kolo's IDX reader (gzip), to keep this example free of a data pipeline

namespace {

struct MlpImpl : torch::nn::Module {
  MlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(784, 256));
    fc2 = register_module("fc2", torch::nn::Linear(256, 128));
    fc3 = register_module("fc3", torch::nn::Linear(128, 10));
  }
  at::Tensor forward(const at::Tensor& x) {
    return fc3->forward(torch::relu(fc2->forward(torch::relu(fc1->forward(x.flatten(1))))));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(Mlp);

struct Args {
  std::string data = "/usr/share/datasets/fashion-mnist";
  int epochs = 1;
  int batch = 64;      // per rank
  double lr = 0.05;
  int max_batches = 0;  // per epoch; 0: all
  bool fp16 = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
      return argv[++i];
    };
    if (k == "--data") a.data = value();
    else if (k == "--epochs") a.epochs = std::stoi(value());
    else if (k == "--batch") a.batch = std::stoi(value());
    else if (k == "--lr") a.lr = std::stod(value());
    else if (k == "--max-batches") a.max_batches = std::stoi(value());
    else if (k == "--fp16") a.fp16 = true;
    else throw std::invalid_argument("unknown option " + k +
                                     " (--data DIR --epochs N --batch B --lr X --max-batches N --fp16)");
  }
  return a;
}

// Images as a float tensor [N,1,28,28] standardised with the training set's statistics.
std::pair<at::Tensor, at::Tensor> to_torch(kolo::nn::Dataset& d, double mean, double stddev) {
  const auto n = static_cast<int64_t>(d.size());
  at::Tensor x = at::from_blob(d.images.data(), {n, 1, 28, 28}, at::kFloat).clone();
  at::Tensor y = at::from_blob(d.labels.data(), {n}, at::kInt).to(at::kLong);
  return {(x - mean) / stddev, y};
}

// Mean of a per-rank scalar over the ranks.
double rank_mean(double v, const std::string& name) {
  at::Tensor t = at::full({1}, v, at::kDouble);
  kolo::torch::allreduce(t, name, {kolo::ReduceOp::kAverage});
  return t.item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  const int rank = kolo::rank(), size = kolo::size();
  int rc = 0;
  try {
    const Args args = parse(argc, argv);
    // The cores of a host shared among its ranks.
    at::set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / kolo::local_size()));
    auto train_set = kolo::nn::load_mnist_dir(args.data, true);
    auto test_set = kolo::nn::load_mnist_dir(args.data, false);
    auto [train_x, train_y] = to_torch(train_set, 0.286, 0.353);  // Fashion-MNIST's pixel statistics
    auto [test_x, test_y] = to_torch(test_set, 0.286, 0.353);

    torch::manual_seed(static_cast<uint64_t>(rank));  // deliberately different: broadcast fixes it
    Mlp model;
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(args.lr).momentum(0.9));
    kolo::torch::broadcast_parameters(*model, 0);
    kolo::torch::broadcast_optimizer_state(sgd, 0);
    kolo::GradientSyncOptions sync;
    sync.compression = args.fp16 ? kolo::Compression::kFp16 : kolo::Compression::kNone;
    kolo::torch::DistributedOptimizer opt(sgd, model->named_parameters(), sync);

    const int64_t n = train_x.size(0);
    const int64_t global = static_cast<int64_t>(args.batch) * size;
    int64_t steps = n / global;
    if (args.max_batches > 0) steps = std::min<int64_t>(steps, args.max_batches);
    for (int epoch = 0; epoch < args.epochs; ++epoch) {
      model->train();
      at::Generator gen = at::detail::createCPUGenerator(1000 + static_cast<uint64_t>(epoch));
      const at::Tensor order = at::randperm(n, gen);  // the same permutation on every rank
      double loss_sum = 0;
      const auto start = std::chrono::steady_clock::now();
      for (int64_t s = 0; s < steps; ++s) {
        // This rank's b samples of the step's global batch of size*b.
        const at::Tensor idx = order.slice(0, s * global + rank * args.batch, s * global + (rank + 1) * args.batch);
        opt.zero_grad();
        at::Tensor loss = torch::nn::functional::cross_entropy(model->forward(train_x.index_select(0, idx)),
                                                               train_y.index_select(0, idx));
        loss.backward();
        opt.step();
        loss_sum += loss.item<double>();
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // Accuracy on this rank's share of the test set, combined over the ranks.
      model->eval();
      at::NoGradGuard no_grad;
      const int64_t per_rank = test_x.size(0) / size;
      const at::Tensor tx = test_x.slice(0, rank * per_rank, (rank + 1) * per_rank);
      const at::Tensor ty = test_y.slice(0, rank * per_rank, (rank + 1) * per_rank);
      const double acc = model->forward(tx).argmax(1).eq(ty).to(at::kDouble).mean().item<double>();
      const double mean_loss = rank_mean(loss_sum / static_cast<double>(std::max<int64_t>(steps, 1)), "example.loss");
      const double mean_acc = rank_mean(acc, "example.accuracy");
      if (rank == 0) {
        std::printf("epoch %d: ranks %d, batch %d per rank, %lld steps, loss %.4f, test accuracy %.2f%%, "
                    "%.2f ms/step\n",
                    epoch + 1, size, args.batch, static_cast<long long>(steps), mean_loss, 100 * mean_acc,
                    1e3 * seconds / static_cast<double>(std::max<int64_t>(steps, 1)));
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    rc = 1;
  }
  kolo::shutdown();
  return rc;
}

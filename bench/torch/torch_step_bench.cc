// kolo-bench-torch-step: step time of a LibTorch model trained with
// kolo::torch::DistributedOptimizer beside the same model, same data, same run, with the
// plain baseline: backward, then one blocking MPI_Allreduce (sum) per gradient tensor and a
// division by the number of ranks, then the optimizer step.
//
//   mpirun -np 2 build/bench/kolo-bench-torch-step [--width 1024] [--layers 4] [--batch 64]
//                                                   [--steps 20] [--rounds 3]
//
// The two modes alternate in rounds (kolo, mpi, kolo, mpi, ...) so that a change of load on
// the machine hits both; each round starts with one untimed step. Reported: the median over
// rounds of the mean step time, per mode, and the ratio kolo / mpi (< 1: kolo faster).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/activation.h>
#include <torch/optim/sgd.h>

#include "kolo/kolo.h"
#include "kolo/torch.h"

namespace {

struct Args {
  int width = 1024, layers = 4, batch = 64, steps = 20, rounds = 3;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::stoi(argv[i + 1]);
    if (k == "--width") a.width = v;
    else if (k == "--layers") a.layers = v;
    else if (k == "--batch") a.batch = v;
    else if (k == "--steps") a.steps = v;
    else if (k == "--rounds") a.rounds = v;
    else throw std::invalid_argument("unknown option " + k);
  }
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  int rc = 0;
  try {
    const Args a = parse(argc, argv);
    const int size = kolo::size();
    at::set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / kolo::local_size()));
    torch::manual_seed(0);
    torch::nn::Sequential model;
    model->push_back(torch::nn::Linear(784, a.width));
    model->push_back(torch::nn::ReLU());
    for (int l = 1; l < a.layers - 1; ++l) {
      model->push_back(torch::nn::Linear(a.width, a.width));
      model->push_back(torch::nn::ReLU());
    }
    model->push_back(torch::nn::Linear(a.width, 10));
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    kolo::torch::broadcast_parameters(*model, 0);
    const at::Tensor x = at::randn({a.batch, 784});
    const at::Tensor y = at::randint(10, {a.batch});
    int64_t count = 0;
    for (const auto& p : model->parameters()) count += p.numel();

    auto forward_backward = [&] {
      torch::nn::functional::cross_entropy(model->forward(x), y).backward();
    };
    std::vector<double> kolo_ms, mpi_ms;
    for (int r = 0; r < a.rounds; ++r) {
      {
        kolo::torch::DistributedOptimizer opt(sgd, model->named_parameters());
        for (int s = 0; s <= a.steps; ++s) {  // step 0 is untimed
          if (s == 1) MPI_Barrier(MPI_COMM_WORLD);
          const auto t0 = std::chrono::steady_clock::now();
          opt.zero_grad();
          forward_backward();
          opt.step();
          if (s > 0) {
            if (s == 1) kolo_ms.push_back(0);
            kolo_ms.back() += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          }
        }
        kolo_ms.back() /= a.steps;
      }
      for (int s = 0; s <= a.steps; ++s) {
        if (s == 1) MPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = std::chrono::steady_clock::now();
        sgd.zero_grad();
        forward_backward();
        for (auto& p : model->parameters()) {
          at::Tensor g = p.grad();
          MPI_Allreduce(MPI_IN_PLACE, g.data_ptr<float>(), static_cast<int>(g.numel()), MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD);
          g.div_(size);
        }
        sgd.step();
        if (s > 0) {
          if (s == 1) mpi_ms.push_back(0);
          mpi_ms.back() += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        }
      }
      mpi_ms.back() /= a.steps;
    }
    if (kolo::rank() == 0) {
      const double k = median(kolo_ms), m = median(mpi_ms);
      std::printf("torch step: np %d, MLP %d x %d (%lld parameters, %zu tensors), batch %d per rank, %d steps x %d rounds\n",
                  size, a.layers, a.width, static_cast<long long>(count), model->parameters().size(), a.batch,
                  a.steps, a.rounds);
      std::printf("kolo DistributedOptimizer: %.2f ms/step\nper-tensor MPI_Allreduce: %.2f ms/step\nratio kolo/mpi: %.3f\n",
                  k, m, k / m);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", kolo::rank(), e.what());
    rc = 1;
  }
  kolo::shutdown();
  return rc;
}

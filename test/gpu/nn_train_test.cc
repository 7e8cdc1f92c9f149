// The GPU trainer end to end, through kolo (run under mpirun by collectives_main.cc):
// a GPU model matches its CPU model for a full training step, losses fall over a few
// steps on GPU, and the gradients a GpuDistributedOptimizer hands to the optimizer are
// the average of every rank's gradients (each rank recomputes all ranks' gradients on
// the CPU from the same seeds, so it checks the result alone).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "kolo/kolo.h"
#include "nn/data.h"
#include "nn/gpu/distributed.h"
#include "nn/gpu/loss.h"
#include "nn/gpu/model.h"
#include "nn/loss.h"
#include "nn/models.h"
#include "test/gpu/nn_test_util.h"

using namespace kolo;
using kolo::test::random_tensor;
using kolo::test::require_close;
namespace g = kolo::nn::gpu;

namespace {

int current_device() {
  int d = 0;
  cudaGetDevice(&d);
  return d;
}

struct Batch {
  nn::Tensor x;
  std::vector<int32_t> y;
};

Batch make_batch(const nn::Dims& sample, int n, int classes, uint64_t seed) {
  nn::Dims shape{n};
  shape.insert(shape.end(), sample.begin(), sample.end());
  Batch b{random_tensor(shape, seed), std::vector<int32_t>(static_cast<size_t>(n))};
  for (int i = 0; i < n; ++i) b.y[static_cast<size_t>(i)] = static_cast<int32_t>((seed * 31 + static_cast<uint64_t>(i) * 7) % static_cast<uint64_t>(classes));
  return b;
}

std::vector<float> grads_of(g::DeviceParams& p) {
  std::vector<float> v(p.total_size());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaMemcpy(v.data(), p.grads(), v.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  return v;
}

}  // namespace

TEST_CASE("GpuModel builds every architecture with the CPU model's layout", "[gpu-nn]") {
  // Both trainers build from nn/architectures.h; GpuModel's constructor checks names, shapes
  // and offsets of every tensor, so this fails if the GPU builder policy registers them
  // differently from the CPU one.
  struct Case {
    const char* arch;
    nn::Dims sample;
    int classes;
  };
  for (const Case& c : {Case{"lenet", {1, 28, 28}, 10}, Case{"resnet20", {3, 32, 32}, 10},
                        Case{"resnet56", {1, 28, 28}, 10}, Case{"resnet50", {3, 224, 224}, 1000}}) {
    INFO(c.arch);
    auto cpu = nn::make_model(c.arch, c.sample, c.classes, 1);
    REQUIRE_NOTHROW(std::make_unique<g::GpuModel>(*cpu, current_device()));
  }
}

TEST_CASE("a GPU LeNet and ResNet-20 step equals the CPU step", "[gpu-nn]") {
  for (const char* arch : {"lenet", "resnet20"}) {
    INFO(arch);
    const nn::Dims sample = std::string(arch) == "lenet" ? nn::Dims{1, 28, 28} : nn::Dims{3, 32, 32};
    auto cpu = nn::make_model(arch, sample, 10, 5);
    g::GpuModel gpu(*cpu, current_device());
    const Batch b = make_batch(sample, 8, 10, 17);
    nn::SoftmaxCrossEntropy cpu_loss;
    const auto want = cpu_loss.forward(cpu->forward(b.x, true), b.y.data());
    cpu->backward(b.x, cpu_loss.grad());
    g::DeviceTensor x;
    x.upload(b.x, gpu.context().stream());
    g::GpuSoftmaxCrossEntropy gpu_loss(gpu.context());
    const auto got = gpu_loss.forward(gpu.forward(x, true), b.y.data());
    gpu.backward(x, gpu_loss.grad());
    REQUIRE(std::fabs(got.loss - want.loss) <= 1e-3 * std::max(1.0, want.loss));
    auto cg = cpu->params().grads();
    require_close(grads_of(gpu.params()), std::vector<float>(cg.begin(), cg.end()), 2e-3, std::string(arch) + " gradients");
  }
}

TEST_CASE("GPU training lowers the loss (LeNet SGD-Nesterov, ResNet-20 AdamW)", "[gpu-nn]") {
  struct Case {
    const char* arch;
    nn::Dims sample;
    bool adam;
  };
  for (const Case& c : {Case{"lenet", {1, 28, 28}, false}, Case{"resnet20", {3, 32, 32}, true}}) {
    INFO(c.arch);
    auto cpu = nn::make_model(c.arch, c.sample, 10, 3);
    g::GpuModel model(*cpu, current_device());
    std::unique_ptr<g::GpuOptimizer> inner;
    if (c.adam) {
      AdamOptions a;
      a.lr = 1e-3;
      a.weight_decay = 1e-4;
      a.decoupled = true;
      inner = g::GpuOptimizer::adam(model.params(), model.context(), a);
    } else {
      inner = g::GpuOptimizer::sgd(model.params(), model.context(), SgdOptions{0.02, 0.9, 5e-4, true});
    }
    g::GpuDistributedOptimizer opt(std::move(inner), {});
    g::GpuSoftmaxCrossEntropy loss(model.context());
    const Batch b = make_batch(c.sample, 32, 10, 40 + static_cast<uint64_t>(rank()));
    g::DeviceTensor x;
    x.upload(b.x, model.context().stream());
    // Random labels on random inputs: the loss falls as the batch is memorised, not
    // monotonically (LeNet with momentum has spikes), so the best loss is compared.
    double first = 0, best = 1e9;
    for (int step = 0; step < 20; ++step) {
      const auto r = loss.forward(model.forward(x, true), b.y.data());
      model.backward(x, loss.grad(), opt.hook());
      REQUIRE(opt.step());
      opt.zero_grad();
      if (step == 0) first = r.loss;
      else best = std::min(best, r.loss);
    }
    INFO("first loss " << first << ", best after it " << best);
    REQUIRE(best < 0.8 * first);
  }
}

TEST_CASE("GpuDistributedOptimizer averages every rank's GPU gradients", "[gpu-nn]") {
  const nn::Dims sample{1, 28, 28};
  auto cpu = nn::make_model("lenet", sample, 10, 9);
  g::GpuModel model(*cpu, current_device());
  // lr 0: the update leaves the parameters alone, the gradients show what was averaged.
  g::GpuDistributedOptimizer opt(g::GpuOptimizer::sgd(model.params(), model.context(), SgdOptions{0.0, 0.0, 0.0, false}),
                                 {});
  g::GpuSoftmaxCrossEntropy loss(model.context());
  const Batch mine = make_batch(sample, 6, 10, 1000 + static_cast<uint64_t>(rank()));
  g::DeviceTensor x;
  x.upload(mine.x, model.context().stream());
  loss.forward(model.forward(x, true), mine.y.data());
  model.backward(x, loss.grad(), opt.hook());
  REQUIRE(opt.step());
  const auto got = grads_of(model.params());
  // The expected average, from every rank's batch on the CPU model.
  std::vector<float> want(got.size(), 0.0f);
  nn::SoftmaxCrossEntropy cpu_loss;
  for (int q = 0; q < size(); ++q) {
    cpu->params().zero_grads();
    const Batch b = make_batch(sample, 6, 10, 1000 + static_cast<uint64_t>(q));
    cpu_loss.forward(cpu->forward(b.x, true), b.y.data());
    cpu->backward(b.x, cpu_loss.grad());
    auto cg = cpu->params().grads();
    for (size_t i = 0; i < want.size(); ++i) want[i] += cg[i] / static_cast<float>(size());
  }
  require_close(got, want, 2e-3, "averaged gradients on " + std::to_string(size()) + " rank(s)");
}

TEST_CASE("broadcast_gpu_model copies rank 0's device parameters and buffers", "[gpu-nn]") {
  auto cpu = nn::make_model("resnet20", {3, 32, 32}, 10, 2);
  // Every rank starts from different values; after the broadcast all hold rank 0's.
  for (float& v : cpu->params().values()) v += static_cast<float>(rank());
  for (float& v : cpu->buffers().values()) v += static_cast<float>(rank());
  g::GpuModel model(*cpu, current_device());
  g::broadcast_gpu_model(model.params(), model.buffers(), model.context(), "resnet20", 0);
  auto zero = nn::make_model("resnet20", {3, 32, 32}, 10, 2);
  model.download_to(*cpu);
  auto got = cpu->params().values();
  auto want = zero->params().values();
  REQUIRE(std::equal(got.begin(), got.end(), want.begin(), want.end()));
  auto got_b = cpu->buffers().values();
  auto want_b = zero->buffers().values();
  REQUIRE(std::equal(got_b.begin(), got_b.end(), want_b.begin(), want_b.end()));
}

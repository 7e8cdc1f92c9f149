// Every GPU layer of the trainer (nn/gpu) against its CPU reference layer (nn/) on small
// random inputs: forward output, input gradient, parameter gradients (accumulated, not
// overwritten), BatchNorm's running statistics and evaluation mode, and the loss.
// Needs a GPU (run with --needs-gpu).
#include <catch2/catch.hpp>

#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/gpu/batchnorm.h"
#include "nn/gpu/conv.h"
#include "nn/gpu/layers.h"
#include "nn/gpu/loss.h"
#include "nn/gpu/model.h"
#include "nn/gpu/optimizer.h"
#include "nn/gpu/residual.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/residual.h"
#include "optimizer/optimizer.h"
#include "test/gpu/nn_test_util.h"

using namespace kolo;
using kolo::test::LayerPair;
using kolo::test::random_tensor;
using kolo::test::require_close;
namespace g = kolo::nn::gpu;

namespace {

// Loose enough for cuDNN's FFT and Winograd algorithms, which cudnnFind may pick.
constexpr double kTol = 1e-3;

std::vector<float> host(const nn::Tensor& t) { return {t.data(), t.data() + t.size()}; }

std::vector<float> host(const g::DeviceTensor& t, cudaStream_t s) {
  nn::Tensor h;
  t.download(h, s);
  return host(h);
}

// One training forward and backward on both sides, twice (so that accumulation of the
// parameter gradients is checked too), comparing y, dx and every parameter gradient.
void run_pair(LayerPair& p, const nn::Dims& in, int batch, uint64_t seed) {
  nn::Dims xs{batch};
  xs.insert(xs.end(), in.begin(), in.end());
  nn::Dims ys{batch};
  ys.insert(ys.end(), p.out.begin(), p.out.end());
  cudaStream_t s = p.ctx->stream();
  for (int pass = 0; pass < 2; ++pass) {
    const nn::Tensor x = random_tensor(xs, seed + 10 * pass);
    const nn::Tensor dy = random_tensor(ys, seed + 10 * pass + 1);
    nn::Tensor y, dx;
    p.cpu->forward(x, y, true);
    p.cpu->backward(x, y, dy, &dx);
    g::DeviceTensor gx, gy, gdy, gdx;
    gx.upload(x, s);
    gdy.upload(dy, s);
    p.gpu->forward(gx, gy, true);
    p.gpu->backward(gx, gy, gdy, &gdx);
    const std::string tag = p.gpu->name() + " pass " + std::to_string(pass);
    require_close(host(gy, s), host(y), kTol, tag + " forward");
    require_close(host(gdx, s), host(dx), kTol, tag + " input gradient");
    const auto grads = p.gpu_grads();
    auto cpu_grads = p.cpu_params.grads();
    require_close(grads, std::vector<float>(cpu_grads.begin(), cpu_grads.end()), kTol, tag + " parameter gradients");
  }
}

}  // namespace

TEST_CASE("GPU Conv2d equals the CPU Conv2d", "[nn]") {
  struct Case {
    nn::ConvSpec spec;
    nn::Dims in;
  };
  const Case cases[] = {
      {{6, 5, 1, 2, true}, {1, 12, 12}},   // LeNet's conv1
      {{16, 5, 1, 0, true}, {6, 9, 9}},    // LeNet's conv2, odd size
      {{8, 3, 2, 1, false}, {4, 9, 7}},    // ResNet 3x3 stride 2
      {{12, 1, 2, 0, false}, {5, 8, 8}},   // projection shortcut
      {{7, 7, 2, 3, false}, {3, 16, 16}},  // ResNet-50 stem
  };
  uint64_t seed = 1;
  for (const auto& c : cases) {
    LayerPair p(std::make_unique<nn::Conv2d>("conv", c.spec), std::make_unique<g::GpuConv2d>("conv", c.spec), c.in);
    run_pair(p, c.in, 3, seed += 100);
  }
}

TEST_CASE("GPU Linear equals the CPU Linear", "[nn]") {
  LayerPair p(std::make_unique<nn::Linear>("fc", 10), std::make_unique<g::GpuLinear>("fc", 10), {37});
  run_pair(p, {37}, 5, 3);
}

TEST_CASE("GPU ReLU, MaxPool, GlobalAvgPool and Flatten equal the CPU layers", "[nn]") {
  {
    LayerPair p(std::make_unique<nn::ReLU>("relu"), std::make_unique<g::GpuReLU>("relu"), {3, 5, 5});
    run_pair(p, {3, 5, 5}, 4, 5);
  }
  {
    LayerPair p(std::make_unique<nn::MaxPool2d>("pool", 2, 2), std::make_unique<g::GpuPool>("pool", 2, 2, 0), {3, 8, 8});
    run_pair(p, {3, 8, 8}, 2, 6);
  }
  {
    LayerPair p(std::make_unique<nn::MaxPool2d>("pool", 3, 2, 1), std::make_unique<g::GpuPool>("pool", 3, 2, 1), {2, 9, 9});
    run_pair(p, {2, 9, 9}, 2, 7);
  }
  {
    LayerPair p(std::make_unique<nn::GlobalAvgPool>("gap"), g::GpuPool::global_average("gap"), {4, 7, 7});
    run_pair(p, {4, 7, 7}, 3, 8);
  }
  {
    LayerPair p(std::make_unique<nn::Flatten>("flat"), std::make_unique<g::GpuFlatten>("flat"), {2, 3, 4});
    run_pair(p, {2, 3, 4}, 3, 9);
  }
}

TEST_CASE("GPU BatchNorm2d equals the CPU BatchNorm2d in training and evaluation", "[nn]") {
  const nn::Dims in{5, 6, 6};
  LayerPair p(std::make_unique<nn::BatchNorm2d>("bn"), std::make_unique<g::GpuBatchNorm2d>("bn"), in);
  run_pair(p, in, 4, 10);
  // Two training passes updated the running statistics on both sides.
  auto cpu_buf = p.cpu_buffers.values();
  require_close(p.gpu_buffer_values(), std::vector<float>(cpu_buf.begin(), cpu_buf.end()), kTol, "running statistics");
  const nn::Tensor x = random_tensor({4, 5, 6, 6}, 99);
  nn::Tensor y;
  p.cpu->forward(x, y, false);
  g::DeviceTensor gx, gy;
  gx.upload(x, p.ctx->stream());
  p.gpu->forward(gx, gy, false);
  require_close(host(gy, p.ctx->stream()), host(y), kTol, "evaluation forward");
}

TEST_CASE("GPU residual block (with projection and identity) equals the CPU block", "[nn]") {
  for (int stride : {1, 2}) {
    auto cpu_block = [&] {
      nn::Chain m, s;
      m.add(std::make_unique<nn::Conv2d>("conv1", nn::ConvSpec{8, 3, stride, 1, false}));
      m.add(std::make_unique<nn::BatchNorm2d>("bn1"));
      m.add(std::make_unique<nn::ReLU>("relu"));
      m.add(std::make_unique<nn::Conv2d>("conv2", nn::ConvSpec{8, 3, 1, 1, false}));
      m.add(std::make_unique<nn::BatchNorm2d>("bn2"));
      if (stride != 1) {
        s.add(std::make_unique<nn::Conv2d>("downsample.0", nn::ConvSpec{8, 1, stride, 0, false}));
        s.add(std::make_unique<nn::BatchNorm2d>("downsample.1"));
      }
      return std::make_unique<nn::Residual>("block", std::move(m), std::move(s));
    };
    auto gpu_block = [&] {
      g::GpuChain m, s;
      m.add(std::make_unique<g::GpuConv2d>("conv1", nn::ConvSpec{8, 3, stride, 1, false}));
      m.add(std::make_unique<g::GpuBatchNorm2d>("bn1"));
      m.add(std::make_unique<g::GpuReLU>("relu"));
      m.add(std::make_unique<g::GpuConv2d>("conv2", nn::ConvSpec{8, 3, 1, 1, false}));
      m.add(std::make_unique<g::GpuBatchNorm2d>("bn2"));
      if (stride != 1) {
        s.add(std::make_unique<g::GpuConv2d>("downsample.0", nn::ConvSpec{8, 1, stride, 0, false}));
        s.add(std::make_unique<g::GpuBatchNorm2d>("downsample.1"));
      }
      return std::make_unique<g::GpuResidual>("block", std::move(m), std::move(s));
    };
    const nn::Dims in{8, 6, 6};
    LayerPair p(cpu_block(), gpu_block(), in);
    g::check_same_layout(p.cpu_params, p.gpu_params->host(), "block");
    run_pair(p, in, 3, 20 + static_cast<uint64_t>(stride));
  }
}

TEST_CASE("GPU softmax cross-entropy equals the CPU loss", "[nn]") {
  g::GpuContext ctx(0);
  const nn::Tensor logits = random_tensor({9, 1000}, 5);
  std::vector<int32_t> labels(9);
  for (int i = 0; i < 9; ++i) labels[static_cast<size_t>(i)] = (i * 137) % 1000;
  nn::SoftmaxCrossEntropy cpu;
  const auto want = cpu.forward(logits, labels.data());
  g::GpuSoftmaxCrossEntropy gpu(ctx);
  g::DeviceTensor gl;
  gl.upload(logits, ctx.stream());
  const auto got = gpu.forward(gl, labels.data());
  REQUIRE(std::fabs(got.loss - want.loss) <= 1e-4 * std::fabs(want.loss));
  REQUIRE(got.correct == want.correct);
  require_close(host(gpu.grad(), ctx.stream()), host(cpu.grad()), 1e-5, "loss gradient");
  labels[3] = 1000;
  REQUIRE_THROWS_WITH(gpu.forward(gl, labels.data()), Catch::Contains("label 1000 of sample 3"));
}

TEST_CASE("GPU optimizers update like the CPU optimizers (SGD, Nesterov, Adam, AdamW)", "[nn]") {
  // Three steps on the same gradients from the same values, then values and state compared.
  // Also catches state that is not zero at the first step (the CPU optimizers start at 0).
  struct Case {
    const char* what;
    bool adam;
    SgdOptions sgd;
    AdamOptions adam_opt;
  };
  AdamOptions adam;
  adam.lr = 1e-2;
  adam.weight_decay = 0.1;
  AdamOptions adamw = adam;
  adamw.decoupled = true;
  const Case cases[] = {{"sgd", false, SgdOptions{0.1, 0.0, 0.01, false}, {}},
                        {"sgd momentum", false, SgdOptions{0.1, 0.9, 0.01, false}, {}},
                        {"sgd nesterov", false, SgdOptions{0.1, 0.9, 0.01, true}, {}},
                        {"adam", true, {}, adam},
                        {"adamw", true, {}, adamw}};
  for (const Case& c : cases) {
    INFO(c.what);
    g::GpuContext ctx(0);
    nn::ParamStore cpu(true);
    g::DeviceParams gpu(true);
    for (nn::ParamStore* layout : {&cpu, &gpu.host()}) {
      layout->add("a.weight", {7, 33});
      layout->add("a.bias", {7});
    }
    cpu.finalize();
    gpu.finalize();
    const nn::Tensor values = random_tensor({static_cast<int>(cpu.total_size())}, 31);
    const nn::Tensor grads = random_tensor({static_cast<int>(cpu.total_size())}, 32);
    std::copy(values.data(), values.data() + values.size(), cpu.values().begin());
    std::copy(grads.data(), grads.data() + grads.size(), cpu.grads().begin());
    gpu.upload_values(values.data(), ctx.stream());
    REQUIRE(cudaMemcpyAsync(gpu.grads(), grads.data(), grads.size() * sizeof(float), cudaMemcpyHostToDevice,
                            ctx.stream()) == cudaSuccess);
    ctx.synchronize();
    std::unique_ptr<Optimizer> cpu_opt, check_opt;
    std::unique_ptr<g::GpuOptimizer> gpu_opt;
    nn::ParamStore check(true);
    check.add("a.weight", {7, 33});
    check.add("a.bias", {7});
    check.finalize();
    if (c.adam) {
      cpu_opt = std::make_unique<Adam>(cpu, c.adam_opt);
      check_opt = std::make_unique<Adam>(check, c.adam_opt);
      gpu_opt = g::GpuOptimizer::adam(gpu, ctx, c.adam_opt);
    } else {
      cpu_opt = std::make_unique<SGD>(cpu, c.sgd);
      check_opt = std::make_unique<SGD>(check, c.sgd);
      gpu_opt = g::GpuOptimizer::sgd(gpu, ctx, c.sgd);
    }
    for (int step = 0; step < 3; ++step) {
      cpu_opt->step();
      gpu_opt->step();
    }
    std::vector<float> got(cpu.total_size());
    gpu.download_values(got.data(), ctx.stream());
    const auto want = cpu.values();
    require_close(got, std::vector<float>(want.begin(), want.end()), 1e-5, std::string(c.what) + " values");
    gpu_opt->copy_state_to(*check_opt);
    REQUIRE(check_opt->steps() == 3);
    auto want_state = cpu_opt->state();
    auto got_state = check_opt->state();
    REQUIRE(got_state.size() == want_state.size());
    for (size_t i = 0; i < want_state.size(); ++i) {
      require_close(std::vector<float>(got_state[i].second.begin(), got_state[i].second.end()),
                    std::vector<float>(want_state[i].second.begin(), want_state[i].second.end()), 1e-5,
                    std::string(c.what) + " state " + want_state[i].first);
    }
  }
}

// Every layer's backward pass against central-difference gradients.
#include <catch2/catch.hpp>

#include "gradcheck.h"
#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/residual.h"

using namespace kolo::nn;
using kolo::nn::testing::check_layer_gradients;
using kolo::nn::testing::LayerHarness;

namespace {

void expect_gradients_match(std::unique_ptr<Layer> layer, const Dims& in, int batch) {
  LayerHarness h(std::move(layer), in);
  const auto r = check_layer_gradients(h, batch);
  INFO("worst element: " << r.worst);
  CHECK(r.max_error <= 1.0);
}

}  // namespace

TEST_CASE("Conv2d backward matches numerical gradients", "[layers][conv]") {
  SECTION("3x3, padding 1, stride 1, with bias") {
    expect_gradients_match(std::make_unique<Conv2d>("c", ConvSpec{4, 3, 1, 1, true}), {3, 6, 5}, 2);
  }
  SECTION("3x3, stride 2, odd size") {
    expect_gradients_match(std::make_unique<Conv2d>("c", ConvSpec{3, 3, 2, 1, false}), {2, 7, 7}, 2);
  }
  SECTION("5x5 without padding (LeNet conv2)") {
    expect_gradients_match(std::make_unique<Conv2d>("c", ConvSpec{3, 5, 1, 0, true}), {2, 7, 6}, 2);
  }
  SECTION("1x1 pointwise (no im2col path)") {
    expect_gradients_match(std::make_unique<Conv2d>("c", ConvSpec{5, 1, 1, 0, false}), {3, 4, 4}, 3);
  }
  SECTION("1x1 stride 2 (projection shortcut)") {
    expect_gradients_match(std::make_unique<Conv2d>("c", ConvSpec{4, 1, 2, 0, false}), {3, 5, 5}, 2);
  }
  SECTION("3x3 direct kernels (channels in multiples of 4), 8x8 planes") {
    expect_gradients_match(std::make_unique<Conv2d>("c", ConvSpec{4, 3, 1, 1, true}), {4, 8, 8}, 2);
  }
  SECTION("3x3 direct kernels, rows that are not whole vectors") {
    expect_gradients_match(std::make_unique<Conv2d>("c", ConvSpec{8, 3, 1, 1, false}), {4, 5, 7}, 3);
  }
  SECTION("many tiny images: several images per GEMM chunk") {
    expect_gradients_match(std::make_unique<Conv2d>("c", ConvSpec{2, 3, 1, 1, true}), {1, 3, 3}, 5);
  }
}

namespace {

// Conv2d's output against a naive loop over the definition, for batch 3.
void expect_forward_matches_definition(ConvSpec spec, const Dims& in) {
  LayerHarness h(std::make_unique<Conv2d>("c", spec), in);
  const int cin = in[0], ih_n = in[1], iw_n = in[2], k = spec.kernel, s = spec.stride;
  const int oh_n = (ih_n + 2 * spec.padding - k) / s + 1;
  const int ow_n = (iw_n + 2 * spec.padding - k) / s + 1;
  Tensor x({3, cin, ih_n, iw_n}), y;
  Rng r(5);
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(r.normal());
  h.layer->forward(x, y, true);
  REQUIRE(y.shape() == Dims{3, spec.out_channels, oh_n, ow_n});
  const float* w = h.params.value(0);
  const float* b = spec.bias ? h.params.value(1) : nullptr;
  for (int n = 0; n < 3; ++n)
    for (int co = 0; co < spec.out_channels; ++co)
      for (int oh = 0; oh < oh_n; ++oh)
        for (int ow = 0; ow < ow_n; ++ow) {
          double sum = b ? b[co] : 0.0;
          for (int c = 0; c < cin; ++c)
            for (int i = 0; i < k; ++i)
              for (int j = 0; j < k; ++j) {
                const int ih = oh * s - spec.padding + i, iw = ow * s - spec.padding + j;
                if (ih < 0 || ih >= ih_n || iw < 0 || iw >= iw_n) continue;
                sum += w[((co * cin + c) * k + i) * k + j] *
                       x[((n * cin + c) * ih_n + ih) * iw_n + iw];
              }
          CHECK(y[((n * spec.out_channels + co) * oh_n + oh) * ow_n + ow] ==
                Approx(sum).epsilon(1e-5).margin(1e-5));
        }
}

}  // namespace

TEST_CASE("Conv2d forward equals a direct convolution", "[layers][conv]") {
  SECTION("im2col path: 3x3 stride 2") {
    expect_forward_matches_definition({2, 3, 2, 1, true}, {2, 5, 4});
  }
  SECTION("direct 3x3 path: rows of whole vectors") {
    expect_forward_matches_definition({8, 3, 1, 1, false}, {4, 8, 16});
  }
  SECTION("direct 3x3 path: odd plane, with bias") {
    expect_forward_matches_definition({4, 3, 1, 1, true}, {8, 7, 5});
  }
}

TEST_CASE("Linear backward matches numerical gradients", "[layers]") {
  expect_gradients_match(std::make_unique<Linear>("fc", 5), {7}, 3);
}

TEST_CASE("ReLU, MaxPool, GlobalAvgPool, Flatten backward match", "[layers]") {
  expect_gradients_match(std::make_unique<ReLU>("r"), {2, 3, 3}, 2);
  expect_gradients_match(std::make_unique<MaxPool2d>("p", 2, 2), {2, 4, 6}, 2);
  expect_gradients_match(std::make_unique<MaxPool2d>("p", 3, 2, 1), {2, 5, 5}, 2);
  expect_gradients_match(std::make_unique<GlobalAvgPool>("a"), {3, 3, 2}, 2);
  expect_gradients_match(std::make_unique<Flatten>("f"), {2, 2, 3}, 2);
}

TEST_CASE("Dropout backward uses the forward mask", "[layers]") {
  expect_gradients_match(std::make_unique<Dropout>("d", 0.5f), {20}, 3);
  LayerHarness h(std::make_unique<Dropout>("d", 0.5f), {1000});
  Tensor x({1, 1000}), y;
  for (int64_t i = 0; i < x.size(); ++i) x[i] = 1.0f;
  h.layer->forward(x, y, true);
  int zeros = 0;
  for (int64_t i = 0; i < y.size(); ++i) {
    if (y[i] == 0.0f) ++zeros;
    else CHECK(y[i] == 2.0f);
  }
  CHECK(zeros > 400);
  CHECK(zeros < 600);
  h.layer->forward(x, y, false);
  CHECK(y[0] == 1.0f);
}

TEST_CASE("BatchNorm2d backward matches numerical gradients", "[layers][bn]") {
  SECTION("plain") { expect_gradients_match(std::make_unique<BatchNorm2d>("bn"), {3, 2, 3}, 4); }
  SECTION("with the fused ReLU") {
    expect_gradients_match(BatchNorm2d::with_relu("bn"), {3, 2, 3}, 4);
  }
}

TEST_CASE("BatchNorm2d normalises in training and uses running statistics in eval", "[layers][bn]") {
  LayerHarness h(std::make_unique<BatchNorm2d>("bn", 0.5f), {1, 2, 2});
  std::fill_n(h.params.value(0), 1, 1.0f);  // gamma
  std::fill_n(h.params.value(1), 1, 0.0f);  // beta
  Tensor x({2, 1, 2, 2}), y;
  for (int i = 0; i < 8; ++i) x[i] = static_cast<float>(i);  // mean 3.5, var 5.25
  h.layer->forward(x, y, true);
  double s = 0, ss = 0;
  for (int i = 0; i < 8; ++i) {
    s += y[i];
    ss += y[i] * y[i];
  }
  CHECK(s / 8 == Approx(0.0).margin(1e-6));
  CHECK(ss / 8 == Approx(1.0).epsilon(1e-4));
  // running = 0.5*init + 0.5*batch; the running variance is unbiased (6.0 = 42/7).
  CHECK(h.buffers.value(0)[0] == Approx(1.75));
  CHECK(h.buffers.value(1)[0] == Approx(0.5 + 3.0));
  h.layer->forward(x, y, false);
  CHECK(y[0] == Approx((0 - 1.75) / std::sqrt(3.5 + 1e-5)));
}

TEST_CASE("Residual block backward matches numerical gradients", "[layers][residual]") {
  SECTION("identity shortcut") {
    Chain m;
    m.add(std::make_unique<Conv2d>("conv1", ConvSpec{2, 3, 1, 1, true}));
    m.add(std::make_unique<ReLU>("relu"));
    m.add(std::make_unique<Conv2d>("conv2", ConvSpec{2, 3, 1, 1, true}));
    expect_gradients_match(std::make_unique<Residual>("block", std::move(m), Chain{}), {2, 4, 4}, 2);
  }
  SECTION("projection shortcut with BatchNorm") {
    Chain m, s;
    m.add(std::make_unique<Conv2d>("conv1", ConvSpec{3, 3, 2, 1, false}));
    m.add(std::make_unique<BatchNorm2d>("bn1"));
    s.add(std::make_unique<Conv2d>("downsample.0", ConvSpec{3, 1, 2, 0, false}));
    s.add(std::make_unique<BatchNorm2d>("downsample.1"));
    expect_gradients_match(std::make_unique<Residual>("block", std::move(m), std::move(s)), {2, 4, 4}, 3);
  }
}

TEST_CASE("Softmax cross-entropy: value, gradient and accuracy", "[layers][loss]") {
  Tensor z({2, 3});
  const float vals[6] = {1.0f, 2.0f, 0.5f, -1.0f, 0.0f, 3.0f};
  std::copy(vals, vals + 6, z.data());
  const int32_t labels[2] = {1, 0};
  SoftmaxCrossEntropy ce;
  const auto r = ce.forward(z, labels);
  auto nll = [](const float* row, int label) {
    double s = 0;
    for (int j = 0; j < 3; ++j) s += std::exp(row[j]);
    return std::log(s) - row[label];
  };
  CHECK(r.loss == Approx((nll(vals, 1) + nll(vals + 3, 0)) / 2));
  CHECK(r.correct == 1);
  // Numerical gradient of the mean loss.
  for (int i = 0; i < 6; ++i) {
    Tensor zp = z, zm = z;
    zp[i] += 1e-3f;
    zm[i] -= 1e-3f;
    SoftmaxCrossEntropy a, b;
    const double num = (a.forward(zp, labels).loss - b.forward(zm, labels).loss) / 2e-3;
    CHECK(ce.grad()[i] == Approx(num).margin(1e-4));
  }
  const int32_t bad[2] = {1, 3};
  CHECK_THROWS_WITH(ce.forward(z, bad), Catch::Contains("label 3 of sample 1"));
}

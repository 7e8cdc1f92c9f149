// Model construction (shapes, parameter counts, names), the per-layer gradient callback,
// and that a small model can over-fit a tiny batch.
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "nn/loss.h"
#include "nn/models.h"
#include "optimizer/optimizer.h"

using namespace kolo::nn;

namespace {

void random_batch(Tensor& x, std::vector<int32_t>& y, const Dims& shape, int n, int classes,
                  uint64_t seed) {
  Dims s = {n};
  s.insert(s.end(), shape.begin(), shape.end());
  x.resize(s);
  Rng r(seed);
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(r.normal());
  y.resize(static_cast<size_t>(n));
  for (auto& v : y) v = static_cast<int32_t>(r.below(static_cast<uint64_t>(classes)));
}

}  // namespace

TEST_CASE("LeNet-5 has the classic shape and parameter count", "[models]") {
  auto m = make_model("lenet", {1, 28, 28}, 10, 1);
  CHECK(m->output_shape() == Dims{10});
  CHECK(m->params().count() == 10);
  size_t values = 0;
  for (const auto& p : m->params().infos()) values += p.size;
  CHECK(values == 61706);  // 156 + 2416 + 48120 + 10164 + 850
  CHECK(m->params().info(0).name == "conv1.weight");
}

TEST_CASE("CIFAR ResNets work on 28x28x1 and 32x32x3", "[models]") {
  for (const Dims& in : {Dims{1, 28, 28}, Dims{3, 32, 32}}) {
    auto m = make_model("resnet20", in, 10, 1);
    Tensor x;
    std::vector<int32_t> y;
    random_batch(x, y, in, 2, 10, 3);
    CHECK(m->forward(x, true).shape() == Dims{2, 10});
  }
  auto r20 = make_model("resnet20", {3, 32, 32}, 10, 1);
  size_t values = 0;
  for (const auto& p : r20->params().infos()) values += p.size;
  CHECK(values == 272474);  // with 1x1-conv projection shortcuts (option B)
  auto r56 = make_model("resnet56", {3, 32, 32}, 10, 1);
  CHECK(r56->params().index_of("layer3.8.conv2.weight") >= 0);
}

TEST_CASE("ResNet-50 has torchvision's 161 tensors and 25.6M values", "[models][resnet50]") {
  auto m = make_model("resnet50", {3, 224, 224}, 1000, 1);
  CHECK(m->params().count() == 161);
  size_t values = 0;
  for (const auto& p : m->params().infos()) values += p.size;
  CHECK(values == 25557032);
  CHECK(m->params().info(m->params().index_of("layer4.0.downsample.0.weight")).shape ==
        Dims{2048, 1024, 1, 1});
  CHECK(m->buffers().count() == 2 * 53);  // running mean/var of 53 BatchNorms
}

TEST_CASE("Unknown model names are refused with the list of known ones", "[models]") {
  CHECK_THROWS_WITH(make_model("vgg", {1, 28, 28}, 10, 1), Catch::Contains("known: lenet"));
}

TEST_CASE("Backward reports every parameter exactly once, last layer first", "[models]") {
  auto m = make_model("resnet20", {1, 12, 12}, 10, 1);
  Tensor x;
  std::vector<int32_t> y;
  random_batch(x, y, {1, 12, 12}, 3, 10, 4);
  SoftmaxCrossEntropy loss;
  loss.forward(m->forward(x, true), y.data());
  std::vector<int> order;
  std::vector<std::string> reports;  // first tensor of each report
  m->backward(x, loss.grad(), [&](const std::vector<int>& idx) {
    order.insert(order.end(), idx.begin(), idx.end());
    reports.push_back(m->params().info(idx.front()).name);
  });
  CHECK(order.size() == m->params().count());
  // One report per conv / BatchNorm / fc, not per residual block: the stem's conv and BN,
  // 9 blocks x 4, 2 projections x 2, and fc.
  CHECK(reports.size() == 2 + 9 * 4 + 2 * 2 + 1);
  REQUIRE(reports.size() > 2);
  CHECK(reports[1] == "layer3.2.bn2.weight");
  CHECK(reports[2] == "layer3.2.conv2.weight");
  CHECK(std::set<int>(order.begin(), order.end()).size() == order.size());
  CHECK(m->params().info(order.front()).name == "fc.weight");
  CHECK(m->params().info(order.back()).name == "conv1.weight");
}

TEST_CASE("Same seed gives the same model; another seed a different one", "[models]") {
  auto a = make_model("lenet", {1, 28, 28}, 10, 7);
  auto b = make_model("lenet", {1, 28, 28}, 10, 7);
  auto c = make_model("lenet", {1, 28, 28}, 10, 8);
  CHECK(std::equal(a->params().values().begin(), a->params().values().end(),
                   b->params().values().begin()));
  CHECK_FALSE(std::equal(a->params().values().begin(), a->params().values().end(),
                         c->params().values().begin()));
}

TEST_CASE("A small model over-fits a tiny batch", "[models][overfit]") {
  const std::string arch = GENERATE("lenet", "resnet20");
  auto m = make_model(arch, {1, 16, 16}, 10, 2);
  Tensor x;
  std::vector<int32_t> y;
  random_batch(x, y, {1, 16, 16}, 16, 10, 5);
  kolo::SGD sgd(m->params(), {0.05, 0.9, 0.0, false});
  SoftmaxCrossEntropy loss;
  double first = 0, last = 0;
  int correct = 0;
  for (int step = 0; step < 150; ++step) {
    const auto r = loss.forward(m->forward(x, true), y.data());
    if (step == 0) first = r.loss;
    last = r.loss;
    correct = r.correct;
    sgd.zero_grad();
    m->backward(x, loss.grad());
    sgd.step();
  }
  INFO(arch << ": loss " << first << " -> " << last);
  CHECK(last < 0.05);
  CHECK(correct == 16);
}

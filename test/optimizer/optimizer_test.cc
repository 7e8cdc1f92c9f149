// Optimizers against hand-computed steps, and learning-rate schedules.
#include <catch2/catch.hpp>
#include <cmath>

#include "optimizer/optimizer.h"
#include "optimizer/schedule.h"

using kolo::nn::ParamStore;

namespace {

// One tensor of two values, p = {1, -2}, with gradient g = {0.5, 0.25}.
struct Fixture {
  ParamStore store;
  Fixture() {
    store.add("w", {2});
    store.finalize();
    set({1.0f, -2.0f}, {0.5f, 0.25f});
  }
  void set(std::initializer_list<float> p, std::initializer_list<float> g) {
    std::copy(p.begin(), p.end(), store.value(0));
    std::copy(g.begin(), g.end(), store.grad(0));
  }
  float p(int i) { return store.value(0)[i]; }
};

}  // namespace

TEST_CASE("SGD, momentum, Nesterov and weight decay match hand-computed steps", "[optimizer]") {
  SECTION("plain with weight decay: p -= lr*(g + wd*p)") {
    Fixture f;
    kolo::SGD sgd(f.store, {0.1, 0.0, 0.01, false});
    sgd.step();
    CHECK(f.p(0) == Approx(1.0 - 0.1 * (0.5 + 0.01 * 1.0)));
    CHECK(f.p(1) == Approx(-2.0 - 0.1 * (0.25 - 0.02)));
  }
  SECTION("momentum over two steps") {
    Fixture f;
    kolo::SGD sgd(f.store, {0.1, 0.9, 0.0, false});
    sgd.step();  // buf = g = 0.5; p = 1 - 0.05 = 0.95
    CHECK(f.p(0) == Approx(0.95));
    sgd.step();  // buf = 0.9*0.5 + 0.5 = 0.95; p = 0.95 - 0.095
    CHECK(f.p(0) == Approx(0.855));
  }
  SECTION("Nesterov: p -= lr*(g + mu*buf)") {
    Fixture f;
    kolo::SGD sgd(f.store, {0.1, 0.9, 0.0, true});
    sgd.step();  // buf = 0.5; update 0.5 + 0.45 = 0.95
    CHECK(f.p(0) == Approx(1.0 - 0.095));
    sgd.step();  // buf = 0.95; update 0.5 + 0.855
    CHECK(f.p(0) == Approx(0.905 - 0.1355));
  }
  Fixture f;
  CHECK_THROWS_WITH(kolo::SGD(f.store, {0.1, 0.0, 0.0, true}), Catch::Contains("Nesterov needs momentum"));
}

TEST_CASE("Adam and AdamW match hand-computed steps", "[optimizer]") {
  auto reference = [](double p, double g, int steps, double wd, bool decoupled) {
    double m = 0, v = 0;
    for (int t = 1; t <= steps; ++t) {
      double gi = g;
      if (decoupled) p -= 0.01 * wd * p;
      else gi += wd * p;
      m = 0.9 * m + 0.1 * gi;
      v = 0.999 * v + 0.001 * gi * gi;
      p -= 0.01 * (m / (1 - std::pow(0.9, t))) / (std::sqrt(v / (1 - std::pow(0.999, t))) + 1e-8);
    }
    return p;
  };
  for (bool decoupled : {false, true}) {
    Fixture f;
    kolo::Adam adam(f.store, {0.01, 0.9, 0.999, 1e-8, 0.1, decoupled});
    for (int i = 0; i < 3; ++i) adam.step();
    CHECK(adam.steps() == 3);
    CHECK(f.p(0) == Approx(reference(1.0, 0.5, 3, 0.1, decoupled)).epsilon(1e-5));
    CHECK(f.p(1) == Approx(reference(-2.0, 0.25, 3, 0.1, decoupled)).epsilon(1e-5));
    CHECK(adam.kind() == (decoupled ? "adamw" : "adam"));
  }
  // Adam's first step moves every parameter by about lr, whatever the gradient's scale.
  Fixture f;
  kolo::Adam adam(f.store, {0.01, 0.9, 0.999, 1e-8, 0.0, false});
  adam.step();
  CHECK(f.p(0) == Approx(0.99));
  CHECK(f.p(1) == Approx(-2.01));
}

TEST_CASE("Learning-rate schedules: warm-up, step, cosine, world-size scaling", "[optimizer][schedule]") {
  kolo::LrSchedule s;
  s.base_lr = 0.1;
  s.warmup_epochs = 2;
  s.warmup_start = 0.0;
  s.kind = kolo::LrSchedule::Kind::kCosine;
  s.total_epochs = 12;
  CHECK(s.rate(0) == Approx(0.0));
  CHECK(s.rate(1) == Approx(0.05));
  CHECK(s.rate(2) == Approx(0.1));
  CHECK(s.rate(7) == Approx(0.05));  // halfway through the cosine
  CHECK(s.rate(12) == Approx(0.0).margin(1e-12));
  s.kind = kolo::LrSchedule::Kind::kStep;
  s.milestones = {5, 8};
  CHECK(s.rate(4.9) == Approx(0.1));
  CHECK(s.rate(5) == Approx(0.01));
  CHECK(s.rate(9) == Approx(0.001));
  CHECK(s.with_world_size(4).rate(3) == Approx(0.4));
  CHECK_THROWS_WITH(kolo::LrSchedule::parse_kind("linear"), Catch::Contains("known: constant, step, cosine"));
}

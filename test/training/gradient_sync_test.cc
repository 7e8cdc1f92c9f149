// kolo::GradientSync (kolo/gradient_sync.h) under mpirun: every rank fills its gradients from
// its rank, so each reduction's answer is known exactly; the accumulation window, fp16
// compression, the reduce ops and scale factors, and every documented error.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kolo/gradient_sync.h"
#include "kolo/kolo.h"

using kolo::GradientSync;
using kolo::GradientSyncOptions;
using kolo::ReduceOp;
using kolo::TensorView;

namespace {

double n() { return kolo::size(); }
double r() { return kolo::rank(); }
GradientSyncOptions prefixed(const std::string& prefix) {
  GradientSyncOptions o;
  o.name_prefix = prefix;
  return o;
}
// Sum over ranks of (rank + 1).
double sum_ranks1() { return n() * (n() + 1) / 2; }

template <class T>
std::vector<T> filled(size_t count, double scale) {
  std::vector<T> v(count);
  for (size_t j = 0; j < count; ++j) v[j] = static_cast<T>((r() + 1) * (static_cast<double>(j) + 1) * scale);
  return v;
}

}  // namespace

TEST_CASE("average of float32, float64 and int32 gradients, reported or not", "[gradient-sync]") {
  GradientSync sync;
  auto a = filled<float>(5, 1.0);
  auto b = filled<double>(300, 0.5);
  auto c = filled<int32_t>(7, 2.0);
  const int ia = sync.register_gradient("a", TensorView::of(a));
  const int ib = sync.register_gradient("b", TensorView::of(b));
  const int ic = sync.register_gradient("c", TensorView::of(c));
  CHECK(sync.num_gradients() == 3);
  CHECK(sync.index_of("b") == ib);
  CHECK(sync.index_of("zz") == -1);
  sync.gradient_ready(ia);
  CHECK(sync.submitted(ia));
  CHECK_FALSE(sync.submitted(ib));
  sync.gradient_ready("c");
  CHECK(sync.submitted(ic));
  sync.synchronize();  // submits b, which backward never reported
  CHECK_FALSE(sync.submitted(ia));
  for (size_t j = 0; j < a.size(); ++j) CHECK(a[j] == Approx(sum_ranks1() / n() * (j + 1)));
  for (size_t j = 0; j < b.size(); ++j) CHECK(b[j] == Approx(sum_ranks1() / n() * (j + 1) * 0.5));
  for (size_t j = 0; j < c.size(); ++j) {
    CHECK(c[j] == static_cast<int32_t>(static_cast<int64_t>(sum_ranks1() * 2 * (j + 1)) / kolo::size()));
  }
}

TEST_CASE("set_external: synchronize() skips the gradient; reporting it throws", "[gradient-sync]") {
  GradientSync sync(prefixed("ext."));
  auto a = filled<float>(4, 1.0);
  auto b = filled<float>(3, 1.0);
  const std::vector<float> b_before = b;
  const int ia = sync.register_gradient("a", TensorView::of(a));
  const int ib = sync.register_gradient("b", TensorView::of(b));
  sync.set_external(ib);
  CHECK_THROWS_WITH(sync.gradient_ready(ib), Catch::Contains("\"ext.b\" is reduced by the client"));
  CHECK(sync.reports(ib) == 0);
  sync.synchronize();  // submits a only: b's memory is untouched
  CHECK_FALSE(sync.submitted(ib));
  CHECK(b == b_before);
  for (size_t j = 0; j < a.size(); ++j) CHECK(a[j] == Approx(sum_ranks1() / n() * (j + 1)));
  sync.gradient_ready(ia);
  CHECK_THROWS_WITH(sync.set_external(ia), Catch::Contains("is being reduced"));
  sync.synchronize();
}

TEST_CASE("sum, min, max, product with prescale and postscale", "[gradient-sync]") {
  struct Case {
    ReduceOp op;
    double pre, post;
    double want;  // for element 0 (rank r holds r + 1)
  };
  double prod = 1;
  for (int i = 1; i <= kolo::size(); ++i) prod *= i * 2.0;
  const std::vector<Case> cases = {{ReduceOp::kSum, 2.0, 0.25, sum_ranks1() * 0.5},
                                   {ReduceOp::kMin, 1.0, 3.0, 3.0},
                                   {ReduceOp::kMax, 1.0, 1.0, n()},
                                   {ReduceOp::kProduct, 2.0, 1.0, prod}};
  for (const auto& cs : cases) {
    GradientSyncOptions o;
    o.op = cs.op;
    o.prescale = cs.pre;
    o.postscale = cs.post;
    o.name_prefix = "ops." + std::string(kolo::reduce_op_name(cs.op)) + ".";
    GradientSync sync(o);
    auto g = filled<double>(3, 1.0);
    sync.register_gradient("g", TensorView::of(g));
    sync.gradient_ready(0);
    sync.synchronize();
    CHECK(g[0] == Approx(cs.want));
  }
}

TEST_CASE("backward_passes_per_step: submits on the k-th report; average_over_passes", "[gradient-sync]") {
  for (bool average : {false, true}) {
    GradientSyncOptions o;
    o.backward_passes_per_step = 2;
    o.average_over_passes = average;
    GradientSync sync(o);
    std::vector<float> g(4, 0.0f);
    sync.register_gradient("acc", TensorView::of(g));
    for (int step = 0; step < 2; ++step) {
      std::fill(g.begin(), g.end(), 0.0f);
      for (int pass = 0; pass < 2; ++pass) {
        for (auto& x : g) x += static_cast<float>(r() + 1);  // the framework accumulates
        sync.gradient_ready(0);
        CHECK(sync.reports(0) == pass + 1);
        CHECK(sync.submitted(0) == (pass == 1));
      }
      sync.synchronize();
      CHECK(sync.reports(0) == 0);
      CHECK(g[3] == Approx(2 * sum_ranks1() / n() / (average ? 2 : 1)));
    }
    // A third report in one window is refused, naming the gradient; the window goes on.
    sync.gradient_ready(0);
    sync.gradient_ready(0);
    CHECK_THROWS_WITH(sync.gradient_ready(0), Catch::Contains("\"grad.acc\" reported ready 3 times"));
    sync.synchronize();
  }
}

TEST_CASE("fp16 compression halves the bytes and restores float32/float64", "[gradient-sync]") {
  GradientSyncOptions o;
  o.compression = kolo::Compression::kFp16;
  o.backward_passes_per_step = 2;
  o.average_over_passes = true;
  o.name_prefix = "fp16.";
  GradientSync sync(o);
  auto f = filled<float>(1000, 0.25);  // multiples of 1/4: exact in half up to 2048
  auto d = filled<double>(10, 0.5);
  sync.register_gradient("f", TensorView::of(f));
  sync.register_gradient("d", TensorView::of(d));
  for (int k = 0; k < 2; ++k) sync.gradient_ready(k);
  for (int k = 0; k < 2; ++k) sync.gradient_ready(k);
  sync.synchronize();
  // mean over ranks, halved (1/k); tolerance: half's 11-bit mantissa
  for (size_t j = 0; j < f.size(); j += 97) CHECK(f[j] == Approx(sum_ranks1() / n() * (j + 1) * 0.125).epsilon(1e-3));
  for (size_t j = 0; j < d.size(); ++j) CHECK(d[j] == Approx(sum_ranks1() / n() * (j + 1) * 0.25).epsilon(1e-3));
}

TEST_CASE("views can change between windows; not while submitted", "[gradient-sync]") {
  GradientSync sync(prefixed("views."));
  TensorView unknown;
  unknown.dtype = kolo::DType::kFloat32;
  unknown.shape = {4};
  const int i = sync.register_gradient("late", unknown);  // memory not known yet
  auto g = filled<float>(4, 1.0);
  sync.gradient_ready(i, TensorView::of(g));
  CHECK_THROWS_WITH(sync.set_view(i, TensorView::of(g)), Catch::Contains("\"views.late\" is being reduced"));
  sync.synchronize();
  CHECK(g[0] == Approx(sum_ranks1() / n()));
  auto h = filled<float>(4, 2.0);
  sync.set_view(i, TensorView::of(h));
  sync.synchronize();
  CHECK(h[1] == Approx(sum_ranks1() / n() * 4));
  CHECK(g[0] == Approx(sum_ranks1() / n()));  // the old memory is no longer touched
}

TEST_CASE("invalid use throws kolo::Error naming the gradient", "[gradient-sync]") {
  GradientSync sync(prefixed("bad."));
  std::vector<float> g(2);
  sync.register_gradient("g", TensorView::of(g));
  CHECK_THROWS_WITH(sync.register_gradient("g", TensorView::of(g)), Catch::Contains("\"g\" registered twice"));
  CHECK_THROWS_WITH(sync.register_gradient("", TensorView::of(g)), Catch::Contains("empty gradient name"));
  CHECK_THROWS_WITH(sync.gradient_ready(5), Catch::Contains("no gradient with index 5"));
  CHECK_THROWS_WITH(sync.gradient_ready("nope"), Catch::Contains("no gradient named \"nope\""));
  GradientSyncOptions zero;
  zero.backward_passes_per_step = 0;
  CHECK_THROWS_AS(GradientSync(zero), kolo::Error);
  // Null memory at submission: every rank alike, so no peer waits.
  TensorView null_view;
  null_view.shape = {3};
  sync.register_gradient("null", null_view);
  CHECK_THROWS_WITH(sync.synchronize(), Catch::Contains("\"bad.null\" has no memory"));
  std::vector<float> h(3, static_cast<float>(r()));
  sync.set_view(1, TensorView::of(h));  // the window was reset: with memory it goes through
  sync.synchronize();
  CHECK(h[2] == Approx((n() - 1) / 2));
}

TEST_CASE("a mismatch across ranks fails synchronize on every rank; the next window works", "[gradient-sync]") {
  if (kolo::size() < 2) return;
  GradientSync sync(prefixed("mismatch."));
  std::vector<float> g(kolo::rank() == 1 ? 5 : 4, 1.0f);
  std::vector<float> ok(3, static_cast<float>(r()));
  sync.register_gradient("g", TensorView::of(g));
  sync.register_gradient("ok", TensorView::of(ok));
  CHECK_THROWS_WITH(sync.synchronize(), Catch::Contains("mismatch.g"));
  CHECK(ok[0] == Approx((n() - 1) / 2));  // the other gradient was still reduced
  sync.set_view(0, TensorView::of(g.data(), {4}));
  sync.synchronize();
  CHECK(g[0] == Approx(1.0));
}

int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  int32_t failed = Catch::Session().run(argc, argv) != 0 ? 1 : 0;
  kolo::allreduce(kolo::TensorView::of(&failed, {1}), "test.failed", {kolo::ReduceOp::kMax});
  if (kolo::rank() == 0) std::printf("kolo gradient-sync suite: %s on %d ranks\n", failed ? "FAILED" : "passed", kolo::size());
  kolo::shutdown();
  return failed;
}

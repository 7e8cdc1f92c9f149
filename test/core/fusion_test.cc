// Fusion planning as a pure function: sizes in, buffers out.
#include <catch2/catch.hpp>

#include "core/fusion.h"

using namespace kolo;

namespace {
Response ar(const std::string& name, int64_t elems, DType t = DType::kFloat32, ReduceOp op = ReduceOp::kSum) {
  Response r;
  r.type = Response::Type::kAllreduce;
  r.names = {name};
  r.sizes = {elems};
  r.dtype = t;
  r.reduce_op = op;
  return r;
}
std::vector<std::vector<std::string>> plan(std::vector<Response> in, size_t threshold) {
  std::vector<std::vector<std::string>> out;
  for (auto& r : fuse_responses(std::move(in), threshold)) out.push_back(r.names);
  return out;
}
using Names = std::vector<std::vector<std::string>>;
}  // namespace

TEST_CASE("small tensors are packed up to the threshold", "[fusion]") {
  // 4 bytes per element: 100 elements = 400 bytes; threshold 1000 bytes fits two.
  CHECK(plan({ar("a", 100), ar("b", 100), ar("c", 100), ar("d", 100)}, 1000) == Names{{"a", "b"}, {"c", "d"}});
  CHECK(plan({ar("a", 100), ar("b", 150)}, 1000) == Names{{"a", "b"}});
}

TEST_CASE("a tensor at or above the threshold runs alone", "[fusion]") {
  CHECK(plan({ar("a", 10), ar("big", 250), ar("b", 10)}, 1000) == Names{{"a", "b"}, {"big"}});
  CHECK(plan({ar("huge", 1 << 20)}, 1000) == Names{{"huge"}});
}

TEST_CASE("only identical dtype/op/scales fuse", "[fusion]") {
  auto h = ar("h", 10, DType::kFloat16);
  auto m = ar("m", 10, DType::kFloat32, ReduceOp::kMax);
  auto s = ar("s", 10);
  s.postscale = 0.5;
  CHECK(plan({ar("a", 10), h, m, s, ar("b", 10)}, 1000) == Names{{"a", "b"}, {"h"}, {"m"}, {"s"}});
}

TEST_CASE("only equal sets of joined ranks fuse", "[fusion][join]") {
  auto j1 = ar("j1", 10), j2 = ar("j2", 10), k = ar("k", 10);
  j1.joined = {1};
  j2.joined = {1};
  k.joined = {2};
  CHECK(plan({ar("a", 10), j1, k, j2, ar("b", 10)}, 1000) == Names{{"a", "b"}, {"j1", "j2"}, {"k"}});
}

TEST_CASE("broadcasts, allgathers and errors keep their place and never fuse", "[fusion]") {
  Response b;
  b.type = Response::Type::kBroadcast;
  b.names = {"bc"};
  b.sizes = {10};
  Response e;
  e.type = Response::Type::kError;
  e.names = {"err"};
  CHECK(plan({ar("a", 10), b, e, ar("c", 10)}, 1000) == Names{{"a", "c"}, {"bc"}, {"err"}});
}

TEST_CASE("threshold 0 disables fusion", "[fusion]") {
  CHECK(plan({ar("a", 1), ar("b", 1)}, 0) == Names{{"a"}, {"b"}});
}

TEST_CASE("fused sizes follow the names", "[fusion]") {
  auto out = fuse_responses({ar("a", 3), ar("b", 5), ar("c", 7)}, 1 << 20);
  REQUIRE(out.size() == 1);
  CHECK(out[0].sizes == std::vector<int64_t>{3, 5, 7});
  CHECK(response_bytes(out[0]) == 60);
}

namespace {
Request req(const std::string& name, int64_t elems, DType t = DType::kFloat32) {
  Request q;
  q.kind = OpKind::kAllreduce;
  q.name = name;
  q.shape = {elems};
  q.dtype = t;
  return q;
}
// The planner's plan of `qs`, each as the single-tensor response rank 0 would answer.
std::vector<Response> planner_plan(const std::vector<Request>& qs, size_t threshold) {
  std::vector<Response> in;
  for (const Request& q : qs) {
    Response r = ar(q.name, num_elements(q.shape), q.dtype, q.reduce_op);
    r.prescale = q.prescale, r.postscale = q.postscale, r.device = q.device;
    in.push_back(r);
  }
  return fuse_responses(std::move(in), threshold);
}
size_t uniform(const std::vector<Request>& qs, size_t threshold, std::vector<Response>* out) {
  return plan_uniform_allreduces(qs.size(), [&](size_t i) -> const Request& { return qs[i]; }, threshold, out);
}
}  // namespace

TEST_CASE("the uniform plan is the planner's, reusing its buffers", "[fusion]") {
  std::vector<Response> out;
  // Several rounds into the same buffers: fewer and longer names after more and shorter ones.
  const std::vector<std::vector<int64_t>> rounds = {
      {100, 100, 100, 100, 60, 1, 249}, {249, 249, 249, 249, 249}, {3}, {10, 240, 7, 7, 7, 100, 100, 100}};
  for (size_t t = 0; t < rounds.size(); ++t) {
    std::vector<Request> qs;
    for (size_t i = 0; i < rounds[t].size(); ++i)
      qs.push_back(req((t % 2 ? "a.rather.long.tensor.name.past.sso." : "t") + std::to_string(i), rounds[t][i]));
    const auto want = planner_plan(qs, 1000);
    const size_t n = uniform(qs, 1000, &out);
    REQUIRE(n == want.size());
    for (size_t b = 0; b < n; ++b) CHECK(out[b] == want[b]);
  }
}

TEST_CASE("the uniform plan declines what the planner treats otherwise", "[fusion]") {
  std::vector<Response> out;
  CHECK(uniform({}, 1000, &out) == 0);
  CHECK(uniform({req("a", 10), req("big", 250)}, 1000, &out) == 0);  // runs alone
  CHECK(uniform({req("a", 10), req("empty", 0)}, 1000, &out) == 0);
  CHECK(uniform({req("a", 10), req("h", 10, DType::kFloat16)}, 1000, &out) == 0);
  auto m = req("m", 10);
  m.reduce_op = ReduceOp::kMax;
  CHECK(uniform({req("a", 10), m}, 1000, &out) == 0);
  auto s = req("s", 10);
  s.postscale = 0.5;
  CHECK(uniform({req("a", 10), s}, 1000, &out) == 0);
  auto g = req("g", 10);
  g.kind = OpKind::kAllgather;
  CHECK(uniform({g}, 1000, &out) == 0);
  CHECK(uniform({req("a", 1), req("b", 1)}, 0, &out) == 0);  // threshold 0: no fusion
  CHECK(uniform({req("a", 10), req("b", 10)}, 1000, &out) == 1);
}

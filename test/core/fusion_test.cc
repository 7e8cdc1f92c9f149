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

// The response cache: ids follow insertion order, signatures must match, allgather and
// allgather is never cached, capacity is respected.
#include <catch2/catch.hpp>

#include "core/response_cache.h"

using namespace kolo;

namespace {
Request req(const std::string& name, Shape shape, OpKind kind = OpKind::kAllreduce) {
  Request q;
  q.name = name;
  q.shape = std::move(shape);
  q.kind = kind;
  return q;
}
}  // namespace

TEST_CASE("cached requests are found by name and signature", "[cache]") {
  ResponseCache c(16);
  c.remember(req("a", {4}));
  c.remember(req("b", {2, 2}, OpKind::kBroadcast));
  REQUIRE(c.find(req("a", {4})) == std::optional<uint32_t>(0));
  REQUIRE(c.find(req("b", {2, 2}, OpKind::kBroadcast)) == std::optional<uint32_t>(1));
  CHECK_FALSE(c.find(req("a", {5})));                         // shape changed
  CHECK_FALSE(c.find(req("b", {2, 2})));                      // kind changed
  auto scaled = req("a", {4});
  scaled.postscale = 0.5;
  CHECK_FALSE(c.find(scaled));                                // scale changed
  auto other_rank = req("a", {4});
  other_rank.rank = 3;
  other_rank.device = Device::cpu();
  CHECK(c.find(other_rank) == std::optional<uint32_t>(0));  // rank is not part of the signature
  REQUIRE(c.get(1) != nullptr);
  CHECK(c.get(1)->name == "b");
  CHECK(c.get(2) == nullptr);
}

TEST_CASE("a changed signature replaces the entry under the same id", "[cache]") {
  ResponseCache c(16);
  c.remember(req("a", {4}));
  c.remember(req("a", {8}));
  CHECK(c.size() == 1);
  CHECK(c.find(req("a", {8})) == std::optional<uint32_t>(0));
  CHECK_FALSE(c.find(req("a", {4})));
}

TEST_CASE("allgather is never cached", "[cache]") {
  ResponseCache c(16);
  c.remember(req("g", {3, 2}, OpKind::kAllgather));
  CHECK(c.size() == 0);
  CHECK_FALSE(c.find(req("g", {3, 2}, OpKind::kAllgather)));
}

TEST_CASE("a full cache takes no new names; capacity 0 is off", "[cache]") {
  ResponseCache c(2);
  for (const char* n : {"x", "y", "z"}) c.remember(req(n, {1}));
  CHECK(c.size() == 2);
  CHECK_FALSE(c.find(req("z", {1})));
  ResponseCache off(0);
  off.remember(req("x", {1}));
  CHECK_FALSE(off.enabled());
  CHECK_FALSE(off.find(req("x", {1})));
}

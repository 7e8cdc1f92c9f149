// The response cache: ids follow insertion order, signatures must match, allgather is never
// cached, alltoall keeps its splits and matrix (and is never named to rank 0 by id),
// capacity is respected.
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

TEST_CASE("a refused submission's stand-in neither matches nor enters the cache", "[cache]") {
  ResponseCache c(16);
  Request refused = req("a", {8});
  refused.refused = "allreduce \"a\": scale factors must be finite";
  c.remember(refused);
  CHECK(c.size() == 0);
  c.remember(req("a", {8}));
  CHECK(c.find(req("a", {8})) == std::optional<uint32_t>(0));
  CHECK_FALSE(c.find(refused));
  CHECK_FALSE(c.find_for_root(refused));
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

TEST_CASE("alltoall: cached with its splits and matrix; the matrix follows peers' changes", "[cache]") {
  ResponseCache c(16);
  Request q = req("t", {6, 2}, OpKind::kAlltoall);
  q.splits = {2, 4};
  const std::vector<int64_t> m1 = {2, 4, 3, 3};
  c.remember(q, &m1);
  REQUIRE(c.find(q) == std::optional<uint32_t>(0));
  CHECK(c.matrix(0) == m1);
  CHECK_FALSE(c.find_for_root(q));  // rank 0's entry holds rank 0's splits, not this rank's
  Request moved = q;
  moved.splits = {3, 3};
  CHECK_FALSE(c.find(moved));  // this rank's own splits changed
  Request even = q;
  even.splits.clear();
  CHECK_FALSE(c.find(even));  // the even form is another signature
  // A peer changed its row: this rank's request is the same, the matrix is not.
  const std::vector<int64_t> m2 = {2, 4, 1, 5};
  c.remember(q, &m2);
  CHECK(c.find(q) == std::optional<uint32_t>(0));
  CHECK(c.matrix(0) == m2);
  Request r = req("r", {8}, OpKind::kReducescatter);
  c.remember(r);
  CHECK(c.find_for_root(r) == std::optional<uint32_t>(1));
  CHECK(c.matrix(1).empty());
}

TEST_CASE("a hint is checked: a wrong or stale one gives the right id, never another name's", "[cache]") {
  ResponseCache c(16);
  c.remember(req("a", {4}));
  c.remember(req("b", {8}));
  CHECK(c.find(req("b", {8}), 1) == std::optional<uint32_t>(1));  // right hint
  CHECK(c.find(req("b", {8}), 0) == std::optional<uint32_t>(1));  // another name's id
  CHECK(c.find(req("b", {8}), 7) == std::optional<uint32_t>(1));  // past the end
  CHECK(c.find(req("b", {8}), ResponseCache::kNoHint) == std::optional<uint32_t>(1));
  CHECK_FALSE(c.find(req("b", {9}), 1));  // the hint finds the name; the signature still counts
  CHECK_FALSE(c.find(req("c", {8}), 1));  // not cached, whatever the hint
  // remember with a wrong hint updates the name's own entry, not the hinted one.
  c.remember(req("b", {9}), nullptr, 0);
  CHECK(c.get(0)->shape == Shape{4});
  CHECK(c.get(1)->shape == Shape{9});
  c.remember(req("c", {2}), nullptr, 1);  // a new name with a hint: appended, as without
  CHECK(c.find(req("c", {2})) == std::optional<uint32_t>(2));
  CHECK(c.get(1)->name == "b");
}

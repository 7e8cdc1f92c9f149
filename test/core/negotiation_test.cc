// Rank 0's negotiation as a pure function: complete names become responses in completion
// order, and every kind of disagreement becomes an error naming tensor, ranks and values.
#include <catch2/catch.hpp>

#include "core/negotiation.h"

using namespace kolo;

namespace {

Request req(int rank, const std::string& name, Shape shape, OpKind kind = OpKind::kAllreduce) {
  Request q;
  q.rank = rank;
  q.name = name;
  q.shape = std::move(shape);
  q.kind = kind;
  return q;
}

// Submits `per_rank[r]` for each rank and returns the single response.
Response negotiate(const std::vector<Request>& per_rank) {
  MessageTable t(static_cast<int>(per_rank.size()));
  for (const auto& q : per_rank) REQUIRE(t.add(q).is_ok());
  auto ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  return ready[0];
}

}  // namespace

TEST_CASE("a name becomes ready only when every rank submitted it", "[negotiation]") {
  MessageTable t(3);
  REQUIRE(t.add(req(0, "a", {4})).is_ok());
  REQUIRE(t.add(req(2, "a", {4})).is_ok());
  CHECK(t.take_ready().empty());
  REQUIRE(t.add(req(1, "b", {2})).is_ok());
  REQUIRE(t.add(req(1, "a", {4})).is_ok());
  auto ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].type == Response::Type::kAllreduce);
  CHECK(ready[0].names == std::vector<std::string>{"a"});
  CHECK(ready[0].sizes == std::vector<int64_t>{4});
  CHECK(t.num_pending() == 1);
}

TEST_CASE("responses come out in the order names completed", "[negotiation]") {
  MessageTable t(2);
  for (const char* n : {"x", "y", "z"}) REQUIRE(t.add(req(0, n, {1})).is_ok());
  for (const char* n : {"z", "x", "y"}) REQUIRE(t.add(req(1, n, {1})).is_ok());
  auto ready = t.take_ready();
  REQUIRE(ready.size() == 3);
  CHECK(ready[0].names[0] == "z");
  CHECK(ready[1].names[0] == "x");
  CHECK(ready[2].names[0] == "y");
}

TEST_CASE("shape mismatch names the tensor, the ranks and both shapes", "[negotiation]") {
  auto r = negotiate({req(0, "fc1.w", {120, 400}), req(1, "fc1.w", {120, 401}), req(2, "fc1.w", {120, 400})});
  CHECK(r.type == Response::Type::kError);
  CHECK(r.error == "allreduce \"fc1.w\": shape [120,400] on ranks 0,2 but [120,401] on rank 1");
}

TEST_CASE("three different values are all listed", "[negotiation]") {
  auto r = negotiate({req(0, "t", {1}), req(1, "t", {2}), req(2, "t", {3}), req(3, "t", {1})});
  CHECK(r.error == "allreduce \"t\": shape [1] on ranks 0,3 but [2] on rank 1 and [3] on rank 2");
}

TEST_CASE("dtype, reduce op, scale and device mismatches are errors", "[negotiation]") {
  auto a = req(0, "g", {8});
  auto b = req(1, "g", {8});
  SECTION("dtype") {
    b.dtype = DType::kFloat16;
    CHECK(negotiate({a, b}).error == "allreduce \"g\": dtype float32 on rank 0 but float16 on rank 1");
  }
  SECTION("reduce op") {
    b.reduce_op = ReduceOp::kMax;
    CHECK(negotiate({a, b}).error == "allreduce \"g\": reduce op sum on rank 0 but max on rank 1");
  }
  SECTION("prescale") {
    b.prescale = 0.5;
    CHECK(negotiate({a, b}).error == "allreduce \"g\": prescale 1 on rank 0 but 0.5 on rank 1");
  }
  SECTION("postscale") {
    a.postscale = 2;
    CHECK(negotiate({a, b}).error == "allreduce \"g\": postscale 2 on rank 0 but 1 on rank 1");
  }
  SECTION("device") {
    b.device = Device::gpu(0);
    CHECK(negotiate({a, b}).error == "allreduce \"g\": device cpu on rank 0 but gpu on rank 1");
  }
}

TEST_CASE("ranks calling different collectives under one name is an error", "[negotiation]") {
  auto r = negotiate({req(0, "p", {3}), req(1, "p", {3}, OpKind::kBroadcast)});
  CHECK(r.error == "\"p\": collective allreduce on rank 0 but broadcast on rank 1");
}

TEST_CASE("broadcast roots must agree and be ranks", "[negotiation]") {
  auto a = req(0, "w", {3}, OpKind::kBroadcast);
  auto b = req(1, "w", {3}, OpKind::kBroadcast);
  b.root = 1;
  CHECK(negotiate({a, b}).error == "broadcast \"w\": root 0 on rank 0 but 1 on rank 1");
  a.root = b.root = 5;
  CHECK(negotiate({a, b}).error == "broadcast \"w\": root 5 is not a rank (size 2)");
  a.root = b.root = 1;
  auto ok = negotiate({a, b});
  CHECK(ok.type == Response::Type::kBroadcast);
  CHECK(ok.root == 1);
}

TEST_CASE("a refusal fails the name on every rank, before any disagreement", "[negotiation]") {
  Request bad = req(1, "w", {});  // a stand-in: no shape, so it also disagrees
  bad.refused = "allreduce \"w\": scale factors must be finite (prescale nan, postscale 1.000000)";
  MessageTable t(3);
  REQUIRE(t.add(req(0, "w", {4})).is_ok());
  REQUIRE(t.add(bad).is_ok());
  CHECK(t.take_ready().empty());  // it waits for every rank, as any name does
  Request also = bad;
  also.rank = 2;
  also.refused = "allreduce \"w\": another reason";
  REQUIRE(t.add(also).is_ok());
  auto ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].type == Response::Type::kError);
  CHECK(ready[0].error ==
        "allreduce \"w\": scale factors must be finite (prescale nan, postscale 1.000000); refused on ranks 1,2 "
        "when submitted, so the collective fails on every rank");
  // The next round of the name starts clean.
  for (int r = 0; r < 3; ++r) REQUIRE(t.add(req(r, "w", {4})).is_ok());
  ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].type == Response::Type::kAllreduce);
}

TEST_CASE("allgather allows a different first dimension only", "[negotiation]") {
  auto ok = negotiate({req(0, "rows", {2, 3}, OpKind::kAllgather), req(1, "rows", {0, 3}, OpKind::kAllgather),
                       req(2, "rows", {5, 3}, OpKind::kAllgather)});
  CHECK(ok.type == Response::Type::kAllgather);
  CHECK(ok.sizes == std::vector<int64_t>{2, 0, 5});
  auto bad = negotiate({req(0, "rows", {2, 3}, OpKind::kAllgather), req(1, "rows", {2, 4}, OpKind::kAllgather)});
  CHECK(bad.error == "allgather \"rows\": shape beyond the first dimension [3] on rank 0 but [4] on rank 1");
  auto dims = negotiate({req(0, "r", {2, 3}, OpKind::kAllgather), req(1, "r", {6}, OpKind::kAllgather)});
  CHECK(dims.error == "allgather \"r\": rank (number of dimensions) 2 on rank 0 but 1 on rank 1");
  auto scalar = negotiate({req(0, "s", {}, OpKind::kAllgather), req(1, "s", {}, OpKind::kAllgather)});
  CHECK(scalar.error == "allgather \"s\": needs at least one dimension to gather along");
}

TEST_CASE("two requests of one rank in one round fail that round only", "[negotiation]") {
  MessageTable t(2);
  REQUIRE(t.add(req(0, "dup", {2})).is_ok());
  REQUIRE(t.add(req(0, "dup", {2})).is_ok());
  CHECK(t.take_ready().empty());  // still waiting for rank 1
  REQUIRE(t.add(req(1, "dup", {2})).is_ok());
  auto ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].type == Response::Type::kError);
  CHECK(ready[0].error == "allreduce \"dup\": rank 0 sent two requests for one round (internal error in kolo's protocol)");
  // The next round of the name starts clean.
  REQUIRE(t.add(req(0, "dup", {2})).is_ok());
  REQUIRE(t.add(req(1, "dup", {2})).is_ok());
  ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].type == Response::Type::kAllreduce);
}

TEST_CASE("requests from unknown ranks are refused", "[negotiation]") {
  MessageTable t(2);
  CHECK_FALSE(t.add(req(2, "x", {1})).is_ok());
  CHECK_FALSE(t.add(req(-1, "x", {1})).is_ok());
}

TEST_CASE("stalled() lists names waiting on missing ranks", "[negotiation]") {
  MessageTable t(3);
  auto t0 = MessageTable::Clock::now();
  REQUIRE(t.add(req(0, "late", {1}), t0).is_ok());
  REQUIRE(t.add(req(2, "late", {1}), t0).is_ok());
  CHECK(t.stalled(5.0, t0 + std::chrono::seconds(1)).empty());
  auto s = t.stalled(5.0, t0 + std::chrono::seconds(6));
  REQUIRE(s.size() == 1);
  CHECK(s[0].name == "late");
  CHECK(s[0].missing_ranks == std::vector<int>{1});
  CHECK(s[0].ready_ranks == std::vector<int>{0, 2});
  CHECK(s[0].waited_seconds == Approx(6.0));
}

TEST_CASE("join: a joined rank counts as ready and is listed in the response", "[negotiation][join]") {
  MessageTable t(3);
  REQUIRE(t.add(req(0, "a", {4})).is_ok());
  REQUIRE(t.join(2).is_ok());
  CHECK(t.take_ready().empty());  // rank 1 has neither submitted nor joined
  REQUIRE(t.add(req(1, "a", {4})).is_ok());
  auto ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].type == Response::Type::kAllreduce);
  CHECK(ready[0].joined == std::vector<int32_t>{2});
  CHECK(ready[0].sizes == std::vector<int64_t>{4});
  // A name pending when a rank joins completes at the join.
  REQUIRE(t.add(req(0, "b", {2, 3}, OpKind::kAllgather)).is_ok());
  CHECK(t.take_ready().empty());
  REQUIRE(t.join(1).is_ok());
  ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].type == Response::Type::kAllgather);
  CHECK(ready[0].joined == std::vector<int32_t>{1, 2});
  CHECK(ready[0].sizes == std::vector<int64_t>{2, 0, 0});
  CHECK(ready[0].row_shape == std::vector<int64_t>{3});
  CHECK_FALSE(t.all_joined());
  REQUIRE(t.join(0).is_ok());
  CHECK(t.all_joined());
  CHECK(t.last_joined() == 0);
  CHECK_FALSE(t.join(0).is_ok());  // twice in one round
  t.reset_join();
  CHECK_FALSE(t.all_joined());
  REQUIRE(t.add(req(0, "c", {1})).is_ok());
  CHECK(t.take_ready().empty());  // out of the joined state: every rank again
}

TEST_CASE("join: a joined broadcast root, a GPU tensor, a late request are errors", "[negotiation][join]") {
  MessageTable t(2);
  REQUIRE(t.join(1).is_ok());
  Request b = req(0, "bc", {5}, OpKind::kBroadcast);
  b.root = 1;
  REQUIRE(t.add(b).is_ok());
  Request g = req(0, "gpu", {5});
  g.device = Device::gpu(0);
  REQUIRE(t.add(g).is_ok());
  REQUIRE(t.add(req(0, "late", {1})).is_ok());
  REQUIRE(t.add(req(1, "late", {1})).is_ok());  // rank 1 submits after joining
  auto ready = t.take_ready();
  REQUIRE(ready.size() == 3);
  CHECK(ready[0].type == Response::Type::kError);
  CHECK_THAT(ready[0].error, Catch::Contains("bc") && Catch::Contains("the root, rank 1, has joined"));
  CHECK(ready[1].type == Response::Type::kError);
  CHECK_THAT(ready[1].error, Catch::Contains("gpu") && Catch::Contains("CPU collectives only"));
  CHECK(ready[2].type == Response::Type::kError);
  CHECK_THAT(ready[2].error, Catch::Contains("late") && Catch::Contains("after calling kolo::join()"));
}

TEST_CASE("join: under Horovod's rules allgather and broadcast with a joined rank fail, allreduce runs",
          "[negotiation][join]") {
  for (bool horovod : {false, true}) {
    MessageTable t(3);
    t.set_horovod_join(horovod);
    REQUIRE(t.join(2).is_ok());
    for (int r = 0; r < 2; ++r) {
      REQUIRE(t.add(req(r, "ag", {1, 2}, OpKind::kAllgather)).is_ok());
      REQUIRE(t.add(req(r, "bc", {3}, OpKind::kBroadcast)).is_ok());
      REQUIRE(t.add(req(r, "ar", {3})).is_ok());
    }
    auto ready = t.take_ready();
    REQUIRE(ready.size() == 3);
    INFO("horovod rules: " << horovod);
    for (const Response& r : ready) {
      CHECK(r.joined == std::vector<int32_t>{2});
      if (r.names[0] == "ar" || !horovod) {
        CHECK(r.type != Response::Type::kError);
      } else {
        CHECK(r.type == Response::Type::kError);
        CHECK_THAT(r.error, Catch::Contains("\"" + r.names[0] + "\"") && Catch::Contains("rank(s) 2 have joined") &&
                                Catch::Contains("KOLO_JOIN_RULES=horovod"));
      }
    }
  }
}

namespace {
Request member(int rank, const std::string& group, int index, int group_size, Shape shape = {4}) {
  Request q = req(rank, group + "[" + std::to_string(index) + "]", std::move(shape));
  q.group = group;
  q.group_size = group_size;
  return q;
}
}  // namespace

TEST_CASE("a group is released only once every member is ready on every rank", "[negotiation]") {
  MessageTable t(2);
  REQUIRE(t.add(member(0, "g", 0, 3)).is_ok());
  REQUIRE(t.add(member(1, "g", 0, 3)).is_ok());  // member 0 complete
  REQUIRE(t.add(member(0, "g", 1, 3)).is_ok());
  REQUIRE(t.add(member(1, "g", 1, 3)).is_ok());  // member 1 complete
  REQUIRE(t.add(member(0, "g", 2, 3)).is_ok());
  CHECK(t.take_ready().empty());                 // member 2 missing on rank 1
  REQUIRE(t.add(member(1, "g", 2, 3)).is_ok());
  auto ready = t.take_ready();
  REQUIRE(ready.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(ready[i].type == Response::Type::kAllreduce);
    CHECK(ready[i].names[0] == "g[" + std::to_string(i) + "]");
  }
  CHECK(t.num_pending() == 0);
}

TEST_CASE("a bad member fails the whole group; groups of different sizes fail every member", "[negotiation]") {
  {
    MessageTable t(2);
    for (int i = 0; i < 2; ++i) {
      REQUIRE(t.add(member(0, "g", i, 2)).is_ok());
      REQUIRE(t.add(member(1, "g", i, 2, i == 1 ? Shape{5} : Shape{4})).is_ok());
    }
    auto ready = t.take_ready();
    REQUIRE(ready.size() == 2);
    for (const auto& r : ready) {
      CHECK(r.type == Response::Type::kError);
      CHECK(r.error ==
            "grouped allreduce \"g\" failed: member \"g[1]\": allreduce \"g[1]\": shape [4] on rank 0 but [5] on rank 1");
    }
  }
  {
    MessageTable t(2);
    for (int i = 0; i < 3; ++i) REQUIRE(t.add(member(0, "h", i, 3)).is_ok());
    for (int i = 0; i < 2; ++i) REQUIRE(t.add(member(1, "h", i, 2)).is_ok());
    auto ready = t.take_ready();
    REQUIRE(ready.size() == 3);  // h[2], sent by rank 0 only, fails too (nothing left pending)
    for (const auto& r : ready) {
      CHECK(r.type == Response::Type::kError);
      CHECK(r.error == "grouped allreduce \"h\": group size 3 on rank 0 but 2 on rank 1");
    }
    CHECK(t.num_pending() == 0);
  }
}

TEST_CASE("alltoall splits become the rank-by-rank matrix, or an error naming the rank", "[negotiation]") {
  auto a2a = [](int rank, Shape shape, std::vector<int64_t> splits) {
    Request q = req(rank, "t", std::move(shape), OpKind::kAlltoall);
    q.splits = std::move(splits);
    return q;
  };
  auto r = negotiate({a2a(0, {3, 2}, {1, 2}), a2a(1, {4, 2}, {})});
  CHECK(r.type == Response::Type::kAlltoall);
  CHECK(r.sizes == std::vector<int64_t>{1, 2, 2, 2});
  r = negotiate({a2a(0, {3}, {1, 1}), a2a(1, {4}, {})});
  CHECK(r.type == Response::Type::kError);
  CHECK(r.error == "alltoall \"t\": rank 0 gave splits [1,1] that add up to 2 rows, but its first dimension is 3");
}

TEST_CASE("pending_ranks names who submitted and who is still awaited, in job ranks", "[negotiation]") {
  MessageTable set(7, {1, 3, 5});
  Request q = req(3, "x", {4});
  q.process_set = 7;
  REQUIRE(set.add(q).is_ok());
  std::vector<int> have, missing;
  REQUIRE(set.pending_ranks("x", &have, &missing));
  CHECK(have == std::vector<int>{3});
  CHECK(missing == std::vector<int>{1, 5});
  CHECK_FALSE(set.pending_ranks("y", &have, &missing));
  // A joined rank is not awaited.
  MessageTable all(3);
  REQUIRE(all.join(2).is_ok());
  REQUIRE(all.add(req(0, "x", {4})).is_ok());
  REQUIRE(all.pending_ranks("x", &have, &missing));
  CHECK(have == std::vector<int>{0});
  CHECK(missing == std::vector<int>{1});
}

TEST_CASE("a round failed before every rank submitted it: the counted ranks fail, each owed request fails alone on arrival",
          "[negotiation]") {
  // fail_pending as rank 0's cross-set check uses it (docs/correctness.md, finding 23): rank
  // 0 had the name from rank 0 only; ranks 2 and 3 owe their request (rank 1 spent its round
  // on another set). Their requests, when they come, must not start a round of their own.
  MessageTable t(4);
  REQUIRE(t.add(req(0, "g", {4})).is_ok());
  t.fail_pending("g", "allreduce \"g\": conflict", {2, 3});
  auto ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].type == Response::Type::kError);
  CHECK(ready[0].error == "allreduce \"g\": conflict");
  CHECK(ready[0].ranks == std::vector<int32_t>{0});  // only rank 0's request was counted
  CHECK(t.owes("g"));
  // Rank 2's request (in flight when the round failed) settles its debt: an error for rank 2 alone.
  bool first = true;
  REQUIRE(t.add(req(2, "g", {4}), 2, MessageTable::Clock::now(), &first).is_ok());
  CHECK_FALSE(first);
  CHECK(t.num_pending() == 0);  // not counted as a new round
  CHECK(t.num_ready() == 1);
  ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].type == Response::Type::kError);
  CHECK(ready[0].ranks == std::vector<int32_t>{2});
  CHECK(ready[0].error == "allreduce \"g\": conflict");
  CHECK(t.owes("g"));  // rank 3 still owes
  // The next round: ranks 0, 1 and 2 submit again, rank 3's first request settles its debt,
  // and its second completes the round with everyone.
  for (int r : {0, 1, 2}) REQUIRE(t.add(req(r, "g", {4})).is_ok());
  REQUIRE(t.add(req(3, "g", {4})).is_ok());
  CHECK_FALSE(t.owes("g"));
  ready = t.take_ready();
  REQUIRE(ready.size() == 1);  // rank 3's settlement
  CHECK(ready[0].ranks == std::vector<int32_t>{3});
  REQUIRE(t.add(req(3, "g", {4})).is_ok());
  ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].type == Response::Type::kAllreduce);
  CHECK(ready[0].ranks.empty());
}

TEST_CASE("a debtor that submitted before the failure is counted, not owed", "[negotiation]") {
  MessageTable t(3);
  REQUIRE(t.add(req(0, "g", {4})).is_ok());
  REQUIRE(t.add(req(2, "g", {4})).is_ok());
  t.fail_pending("g", "x", {1, 2});  // rank 2 is counted already: only rank 1 owes
  auto ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].ranks == std::vector<int32_t>{0, 2});
  REQUIRE(t.add(req(2, "g", {4})).is_ok());  // rank 2's next round is a new round
  CHECK(t.num_pending() == 1);
  CHECK(t.take_ready().empty());
  REQUIRE(t.add(req(1, "g", {4})).is_ok());  // rank 1's settles its debt
  ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].ranks == std::vector<int32_t>{1});
  CHECK_FALSE(t.owes("g"));
}

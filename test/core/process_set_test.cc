// Process sets without peers: KOLO_PROCESS_SETS parsing, rank checks, the registry, and a
// set's negotiation table (job ranks in, set ranks in the responses, job ranks in messages).
#include "core/process_set.h"

#include <catch2/catch.hpp>
#include <map>

#include "core/config.h"
#include "core/fusion.h"
#include "core/negotiation.h"
#include "core/response_cache.h"

using namespace kolo;

namespace {

// A request of job rank `rank` on process set 4.
Request req(int rank, const std::string& name, Shape shape, OpKind kind = OpKind::kAllreduce) {
  return Request{.rank = rank, .kind = kind, .shape = std::move(shape), .name = name, .process_set = 4};
}

std::string parse_error(const std::string& text) {
  std::vector<std::vector<int>> sets;
  Status s = parse_process_sets(text, &sets);
  REQUIRE_FALSE(s.is_ok());
  return s.message();
}

}  // namespace

TEST_CASE("KOLO_PROCESS_SETS: sets by ';', ranks by ','", "[process-sets]") {
  std::vector<std::vector<int>> sets;
  REQUIRE(parse_process_sets("0,1;2,3", &sets).is_ok());
  CHECK(sets == std::vector<std::vector<int>>{{0, 1}, {2, 3}});
  REQUIRE(parse_process_sets(" 3 , 1 ; 0 ", &sets).is_ok());
  CHECK(sets == std::vector<std::vector<int>>{{3, 1}, {0}});
  REQUIRE(parse_process_sets("", &sets).is_ok());
  CHECK(sets.empty());
  Config c;
  std::map<std::string, std::string> env{{"KOLO_PROCESS_SETS", "0,2;1"}};
  REQUIRE(Config::parse(
              [&](const std::string& n) -> std::optional<std::string> {
                auto it = env.find(n);
                return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
              },
              &c)
              .is_ok());
  CHECK(c.process_sets == std::vector<std::vector<int>>{{0, 2}, {1}});
}

TEST_CASE("KOLO_PROCESS_SETS: a malformed value names the variable and the token", "[process-sets]") {
  CHECK_THAT(parse_error("0,1;2,x"), Catch::Contains("KOLO_PROCESS_SETS=\"0,1;2,x\"") && Catch::Contains("at \"x\""));
  CHECK_THAT(parse_error("0,-1"), Catch::Contains("at \"-1\""));
  CHECK_THAT(parse_error("0,1;;2"), Catch::Contains("an empty set"));
  CHECK_THAT(parse_error("0,,1"), Catch::Contains("an empty rank"));
  CHECK_THAT(parse_error("0 1"), Catch::Contains("at \"0 1\""));
}

TEST_CASE("a set's ranks are checked against the job and sorted", "[process-sets]") {
  std::vector<int> sorted;
  REQUIRE(check_process_set_ranks({3, 0, 2}, 4, "w", &sorted).is_ok());
  CHECK(sorted == std::vector<int>{0, 2, 3});
  CHECK_THAT(check_process_set_ranks({}, 4, "w", &sorted).message(), Catch::Contains("at least one rank"));
  CHECK_THAT(check_process_set_ranks({0, 4}, 4, "w", &sorted).message(),
             Catch::StartsWith("w: rank 4 is not a rank of the job (ranks are 0..3)"));
  CHECK_THAT(check_process_set_ranks({1, 1}, 4, "w", &sorted).message(), Catch::Contains("rank 1 is listed twice"));
}

TEST_CASE("the registry hands out ids in sequence; reserved sets become active", "[process-sets]") {
  ProcessSetRegistry r;
  const int32_t a = r.reserve({0, 1});
  const int32_t b = r.reserve({2});
  CHECK(a == 1);
  CHECK(b == 2);
  bool active = true;
  REQUIRE(r.ranks(a, &active));
  CHECK_FALSE(active);
  CHECK(r.active_sets().empty());
  const uint64_t v = r.version();
  r.activate(a);
  CHECK(r.version() != v);
  CHECK(r.active_sets() == std::map<int32_t, std::vector<int>>{{1, {0, 1}}});
  CHECK(r.erase(b));
  CHECK_FALSE(r.erase(b));
  CHECK_FALSE(r.ranks(b));
  CHECK(r.reserve({3}) == 3);  // ids are never reused
}

TEST_CASE("a set's table: job ranks in, set ranks in the response, job ranks in messages", "[process-sets]") {
  MessageTable t(4, {1, 3, 6});
  // Allgather: first dimensions by set rank; the response carries the set's id.
  REQUIRE(t.add(req(6, "g", {3, 2}, OpKind::kAllgather)).is_ok());
  REQUIRE(t.add(req(1, "g", {1, 2}, OpKind::kAllgather)).is_ok());
  CHECK(t.take_ready().empty());
  REQUIRE(t.add(req(3, "g", {0, 2}, OpKind::kAllgather)).is_ok());
  auto ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].process_set == 4);
  CHECK(ready[0].sizes == std::vector<int64_t>{1, 0, 3});
  // Broadcast: the root is a job rank in requests, the set rank in the response.
  for (int r : {1, 3, 6}) {
    Request q = req(r, "b", {5}, OpKind::kBroadcast);
    q.root = 6;
    REQUIRE(t.add(q).is_ok());
  }
  ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].type == Response::Type::kBroadcast);
  CHECK(ready[0].root == 2);
  for (int r : {1, 3, 6}) {
    Request q = req(r, "b2", {5}, OpKind::kBroadcast);
    q.root = 2;  // a job rank, but not a member
    REQUIRE(t.add(q).is_ok());
  }
  ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK_THAT(ready[0].error, Catch::Contains("root 2 is not in the process set"));
  // A disagreement names job ranks.
  REQUIRE(t.add(req(1, "s", {4})).is_ok());
  REQUIRE(t.add(req(3, "s", {4})).is_ok());
  REQUIRE(t.add(req(6, "s", {5})).is_ok());
  ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].error == "allreduce \"s\": shape [4] on ranks 1,3 but [5] on rank 6");
  // A request from a rank outside the set is refused; a stalled name lists job ranks.
  CHECK_FALSE(t.add(req(2, "x", {1})).is_ok());
  const auto t0 = MessageTable::Clock::now();
  REQUIRE(t.add(req(3, "late", {1}), 3, t0).is_ok());
  const auto stalled = t.stalled(1.0, t0 + std::chrono::seconds(2));
  REQUIRE(stalled.size() == 1);
  CHECK(stalled[0].ready_ranks == std::vector<int>{3});
  CHECK(stalled[0].missing_ranks == std::vector<int>{1, 6});
}

TEST_CASE("alltoall splits in a set are one per member, the matrix by set rank", "[process-sets]") {
  MessageTable t(1, {0, 2});
  Request a = req(0, "a", {3}, OpKind::kAlltoall), b = req(2, "a", {1}, OpKind::kAlltoall);
  a.splits = {1, 2};
  b.splits = {1, 0};
  REQUIRE(t.add(a).is_ok());
  REQUIRE(t.add(b).is_ok());
  auto ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].sizes == std::vector<int64_t>{1, 2, 1, 0});
  a.name = b.name = "bad";
  b.splits = {1, 0, 0};  // one per job rank instead of one per member
  REQUIRE(t.add(a).is_ok());
  REQUIRE(t.add(b).is_ok());
  ready = t.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK_THAT(ready[0].error, Catch::Contains("rank 2 gave 3 splits [1,0,0] for 2 ranks"));
}

TEST_CASE("sets never fuse together; a set's requests are cached in its own cache only", "[process-sets]") {
  Response a, b;
  a.type = b.type = Response::Type::kAllreduce;
  a.names = {"a"};
  b.names = {"b"};
  a.sizes = b.sizes = {10};
  b.process_set = 1;
  CHECK(fuse_responses({a, b}, 1 << 20).size() == 2);
  Request q = req(0, "c", {4});  // on set 4
  const ResponseCache global(16), set4(16, 4), set2(16, 2);
  CHECK_FALSE(global.cacheable(q));
  CHECK(set4.cacheable(q));
  CHECK_FALSE(set2.cacheable(q));
  q.process_set = 0;
  CHECK(global.cacheable(q));
  CHECK_FALSE(set4.cacheable(q));
}

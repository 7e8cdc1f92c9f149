// FastPath (core/fast_path.h): what a rank holds for the board, what goes to rank 0 instead,
// and what a round agrees on and plans. Two ranks are two FastPaths over one block of plain
// memory, each with its own response cache holding the same entries, driven in turn from
// one thread (no call blocks, so any interleaving can be written down).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "core/fast_path.h"

namespace kolo {
namespace {

using Clock = FastPath::Clock;
constexpr size_t kCapacity = 64;

Request allreduce(const std::string& name, int64_t elements = 4, DType dtype = DType::kFloat32) {
  Request q;
  q.name = name;
  q.kind = OpKind::kAllreduce;
  q.dtype = dtype;
  q.shape = {elements};
  return q;
}

struct Board {
  explicit Board(int size) : words(FastBoard::bytes_needed(size, kCapacity) / 8 + 1, 0) {}
  std::vector<uint64_t> words;  // zeroed, 8-byte aligned
};

// One rank: its cache, its fast path, and what its demotions sent where.
struct Rank {
  Rank(Board& b, int rank, int size, Config config = {})
      : cache(kCapacity),
        fast(b.words.data(), topology(rank, size), with_capacity(config), cache,
             [this](const Request& q, Clock::time_point) { to_table.push_back(q.name); }) {}

  static Topology topology(int rank, int size) {
    Topology t;
    t.rank = t.local_rank = rank;
    t.size = t.local_size = size;
    return t;
  }
  static Config with_capacity(Config c) {
    c.cache_capacity = kCapacity;
    return c;
  }
  // Holds a fresh copy of `q` in queue slot `slot`.
  bool hold(Request q, uint32_t slot) { return fast.hold(q, slot, Clock::now()); }
  // The round's planned collectives: their names, and the slots each one takes (empty when
  // taken by name).
  std::vector<std::vector<std::string>> take_round(size_t threshold, std::vector<std::vector<uint32_t>>* slots) {
    size_t n = 0;
    REQUIRE(fast.take_round(threshold, &n).is_ok());
    std::vector<std::vector<std::string>> names;
    for (size_t i = 0; i < n; ++i) {
      const Response& r = fast.collective(i);
      names.push_back(r.names);
      slots->push_back(fast.slots_for(r) ? fast.slots() : std::vector<uint32_t>{});
      fast.count_collective();
    }
    fast.end_round();
    return names;
  }

  ResponseCache cache;
  std::vector<std::string> to_table;
  FastPath fast;
};

// Both ranks remember `names` (as after a list that ran them), in this order.
void remember(std::vector<Rank*> ranks, const std::vector<Request>& qs) {
  for (Rank* r : ranks)
    for (const Request& q : qs) r->cache.remember(q);
}

// Every rank offers (or joins) and resolves once; returns which ranks agreed on tensors.
std::vector<bool> round(std::vector<Rank*> ranks) {
  bool activity = false;
  for (Rank* r : ranks) {
    REQUIRE_FALSE(r->fast.open());
    r->fast.offer(Clock::now(), &activity);
  }
  std::vector<bool> run;
  for (Rank* r : ranks) {
    REQUIRE(r->fast.open());
    run.push_back(r->fast.resolve(&activity));
    REQUIRE_FALSE(r->fast.open());
  }
  return run;
}

}  // namespace

TEST_CASE("fast path: holds only cached global-set CPU collectives the board carries", "[fast-path]") {
  Board b(2);
  Rank r0(b, 0, 2);
  remember({&r0}, {allreduce("a")});
  CHECK(r0.hold(allreduce("a"), 0));
  CHECK_FALSE(r0.hold(allreduce("new"), 1));  // never negotiated
  CHECK_FALSE(r0.hold(allreduce("a", 8), 2));  // another shape: a mismatch goes to rank 0
  Request bcast = allreduce("a");
  bcast.kind = OpKind::kBroadcast;
  CHECK_FALSE(r0.hold(bcast, 3));
  Request grouped = allreduce("a");
  grouped.group = "g";
  CHECK_FALSE(r0.hold(grouped, 4));
  Request on_set = allreduce("a");
  on_set.process_set = 3;
  CHECK_FALSE(r0.hold(on_set, 5));
  CHECK(r0.fast.dirty());
}

TEST_CASE("fast path: no board, no fast path", "[fast-path]") {
  ResponseCache cache(kCapacity);
  cache.remember(allreduce("a"));
  Topology t;
  t.size = t.local_size = 2;
  FastPath fast(nullptr, t, Config{}, cache, [](const Request&, Clock::time_point) {});
  Request q = allreduce("a");
  CHECK_FALSE(fast.on());
  CHECK_FALSE(fast.hold(q, 0, Clock::now()));
  CHECK_FALSE(fast.answer());
  CHECK_FALSE(fast.needs_attention());
}

TEST_CASE("fast path: a round runs what every rank holds, fused, in id order, by slot", "[fast-path]") {
  Board b(2);
  Rank r0(b, 0, 2), r1(b, 1, 2);
  const std::vector<Request> qs = {allreduce("w"), allreduce("x"), allreduce("y"), allreduce("z")};
  remember({&r0, &r1}, qs);
  // Rank 0 submits in another order and lacks "z" for now; slots are each rank's own.
  REQUIRE(r0.hold(qs[2], 12));
  REQUIRE(r0.hold(qs[0], 10));
  REQUIRE(r0.hold(qs[1], 11));
  for (uint32_t i = 0; i < 4; ++i) REQUIRE(r1.hold(qs[i], 20 + i));
  CHECK(round({&r0, &r1}) == std::vector<bool>{true, true});
  // 16 B each: two per 40-byte buffer.
  std::vector<std::vector<uint32_t>> s0, s1;
  CHECK(r0.take_round(40, &s0) == std::vector<std::vector<std::string>>{{"w", "x"}, {"y"}});
  CHECK(r1.take_round(40, &s1) == std::vector<std::vector<std::string>>{{"w", "x"}, {"y"}});
  CHECK(s0 == std::vector<std::vector<uint32_t>>{{10, 11}, {12}});
  CHECK(s1 == std::vector<std::vector<uint32_t>>{{20, 21}, {22}});
  CHECK(r0.fast.collectives() == 2);
  CHECK(r0.fast.rounds() == 1);
  // Rank 1 still holds "z": rank 0 offers it too, and rank 1 joins that round.
  REQUIRE(r0.hold(qs[3], 13));
  CHECK(round({&r0, &r1}) == std::vector<bool>{true, true});
  std::vector<std::vector<uint32_t>> t0, t1;
  CHECK(r0.take_round(1 << 20, &t0) == std::vector<std::vector<std::string>>{{"z"}});
  CHECK(r1.take_round(1 << 20, &t1) == std::vector<std::vector<std::string>>{{"z"}});
  CHECK(t0 == std::vector<std::vector<uint32_t>>{{13}});
  CHECK(t1 == std::vector<std::vector<uint32_t>>{{23}});
  CHECK(r0.to_table.empty());
}

TEST_CASE("fast path: a round with mixed dtypes is planned by FusionPlanner and taken by name", "[fast-path]") {
  Board b(2);
  Rank r0(b, 0, 2), r1(b, 1, 2);
  // Fusion pulls "c" (float, like "a") forward past "b" (double): the plan leaves id order.
  const std::vector<Request> qs = {allreduce("a"), allreduce("b", 4, DType::kFloat64), allreduce("c")};
  remember({&r0, &r1}, qs);
  for (Rank* r : {&r0, &r1})
    for (uint32_t i = 0; i < 3; ++i) REQUIRE(r->hold(qs[i], i));
  CHECK(round({&r0, &r1}) == std::vector<bool>{true, true});
  std::vector<std::vector<uint32_t>> s0;
  const auto plan = r0.take_round(1 << 20, &s0);
  REQUIRE(plan.size() == 2);
  CHECK(plan[0] == std::vector<std::string>{"a", "c"});
  CHECK(plan[1] == std::vector<std::string>{"b"});
  CHECK(s0 == std::vector<std::vector<uint32_t>>{{}, {}});  // by name, from the first mismatch on
  std::vector<std::vector<uint32_t>> s1;
  CHECK(r1.take_round(1 << 20, &s1) == plan);
}

TEST_CASE("fast path: ranks that began different lists agree on nothing, then on all", "[fast-path]") {
  Board b(2);
  Rank r0(b, 0, 2), r1(b, 1, 2);
  const Request a = allreduce("a");
  remember({&r0, &r1}, {a});
  REQUIRE(r0.hold(a, 0));
  REQUIRE(r1.hold(a, 0));
  r1.fast.list_started();  // rank 1 is inside a list rank 0 has not begun
  CHECK(round({&r0, &r1}) == std::vector<bool>{false, false});
  r0.fast.list_started();
  // Nothing new is held, but the lists changed: both offer again, and now agree.
  CHECK(round({&r0, &r1}) == std::vector<bool>{true, true});
}

TEST_CASE("fast path: a rank inside a list answers a peer's round with nothing", "[fast-path]") {
  Board b(2);
  Rank r0(b, 0, 2), r1(b, 1, 2);
  const Request a = allreduce("a");
  remember({&r0, &r1}, {a});
  REQUIRE(r1.hold(a, 0));
  bool activity = false;
  REQUIRE(r1.fast.offer(Clock::now(), &activity));
  CHECK_FALSE(r0.fast.open());
  CHECK(r0.fast.needs_attention());
  CHECK(r0.fast.answer());  // publishes an empty record: the round is open to resolve
  CHECK_FALSE(r0.fast.resolve(&activity));
  CHECK_FALSE(r1.fast.resolve(&activity));
  CHECK_FALSE(r0.fast.answer());  // no peer ahead now
}

TEST_CASE("fast path: rank 0 demotes a name the table got to itself and to every peer", "[fast-path]") {
  Board b(2);
  Rank r0(b, 0, 2), r1(b, 1, 2);
  const Request a = allreduce("a"), c = allreduce("c");
  remember({&r0, &r1}, {a, c});
  REQUIRE(r0.hold(a, 0));
  REQUIRE(r0.hold(c, 1));
  REQUIRE(r1.hold(a, 0));
  // Rank 1's "a" reached rank 0's table (say its shape changed): rank 0's own goes there too.
  r0.fast.note_table(a);
  CHECK(r0.to_table == std::vector<std::string>{"a"});
  CHECK_FALSE(r0.hold(a, 0));  // until it next runs
  REQUIRE(r0.fast.has_news());
  ResponseList list;
  r0.fast.put_news(&list);
  CHECK_FALSE(r0.fast.has_news());
  CHECK(list.fast_demote == std::vector<std::string>{"a"});
  // Rank 1 runs that list: its held "a" goes to rank 0, by cache id.
  r1.fast.list_started();
  r1.fast.after_list(list);
  RequestList out;
  r1.fast.take_for_root(&out);
  CHECK(out.cached.size() == 1);
  CHECK(out.requests.empty());
  CHECK_FALSE(r1.hold(a, 0));
  // A list that runs "a" lets both use the board for it again.
  ResponseList ran;
  ran.responses.resize(1);
  ran.responses[0].names = {"a"};
  r0.fast.after_list(ran);
  r1.fast.after_list(ran);
  CHECK(r0.hold(a, 0));
  CHECK(r1.hold(a, 0));
}

TEST_CASE("fast path: a join sends everything held to rank 0 until the join ends", "[fast-path]") {
  Board b(2);
  Rank r0(b, 0, 2), r1(b, 1, 2);
  const Request a = allreduce("a"), c = allreduce("c");
  remember({&r0, &r1}, {a, c});
  REQUIRE(r0.hold(a, 0));
  REQUIRE(r1.hold(c, 1));
  r0.fast.pause_everyone();
  CHECK(r0.to_table == std::vector<std::string>{"a"});
  CHECK_FALSE(r0.hold(a, 0));
  ResponseList list;
  r0.fast.put_news(&list);
  CHECK(list.fast_pause);
  r1.fast.after_list(list);
  RequestList out;
  r1.fast.take_for_root(&out);
  CHECK(out.cached.size() == 1);
  CHECK_FALSE(r1.hold(c, 1));
  ResponseList done;  // the list that ends the join runs "a" through rank 0's table
  done.join_done = true;
  done.responses.resize(1);
  done.responses[0].names = {"a"};
  r0.fast.after_list(done);
  r1.fast.after_list(done);
  CHECK(r0.hold(a, 0));
  CHECK(r1.hold(c, 1));
}

TEST_CASE("fast path: a tensor held past the age limit goes to rank 0", "[fast-path]") {
  Config config;
  config.stall_check_seconds = 0.02;  // held at most 10 ms
  Board b(2);
  Rank r1(b, 1, 2, config);
  const Request a = allreduce("a");
  remember({&r1}, {a});
  Request q = a;
  REQUIRE(r1.fast.hold(q, 0, Clock::now() - std::chrono::seconds(1)));
  bool activity = false;
  // The scan runs once the pass's clock is 10 ms past the last one.
  r1.fast.offer(Clock::now() + std::chrono::milliseconds(20), &activity);
  RequestList out;
  r1.fast.take_for_root(&out);
  CHECK(out.cached.size() == 1);
}

TEST_CASE("fast path: a peer that left closes the board and demotes what is held", "[fast-path]") {
  Board b(2);
  Rank r0(b, 0, 2), r1(b, 1, 2);
  const Request a = allreduce("a");
  remember({&r0, &r1}, {a});
  REQUIRE(r0.hold(a, 0));
  bool activity = false;
  REQUIRE(r0.fast.offer(Clock::now(), &activity));
  r1.fast.leave();
  CHECK_FALSE(r0.fast.resolve(&activity));
  CHECK_FALSE(r0.fast.on());
  CHECK(r0.to_table == std::vector<std::string>{"a"});
  CHECK_FALSE(r0.hold(a, 0));
}

TEST_CASE("fast path: a round that agreed on an id this rank does not hold is an error", "[fast-path]") {
  Board b(2);
  Rank r0(b, 0, 2), r1(b, 1, 2);
  const Request a = allreduce("a");
  remember({&r0, &r1}, {a});
  REQUIRE(r0.hold(a, 0));
  REQUIRE(r1.hold(a, 0));
  CHECK(round({&r0, &r1}) == std::vector<bool>{true, true});
  // Rank 0 loses what it held before it takes the round (a join's pause, say).
  r0.fast.pause();
  size_t n = 7;
  const Status s = r0.fast.take_round(1 << 20, &n);
  CHECK_FALSE(s.is_ok());
  CHECK(s.message().find("agreed on 1 tensors but this rank holds 0") != std::string::npos);
  CHECK(n == 0);
}

}  // namespace kolo

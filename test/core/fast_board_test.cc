// FastBoard (core/fast_board.h): the ranks' verdict on each round is the same on every
// rank, agrees only on ids every rank holds, and only when every rank has started the same
// lists; a rank publishes nothing until it has resolved its round. Ranks are boards over
// one block of memory; threads stand in for processes where rounds must interleave.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/fast_board.h"

using kolo::FastBoard;

namespace {

struct Memory {
  explicit Memory(int size, size_t capacity) : bytes(FastBoard::bytes_needed(size, capacity) / 8 + 1, 0) {}
  void* data() { return bytes.data(); }
  std::vector<uint64_t> bytes;  // zeroed, 8-byte aligned
};

std::vector<uint32_t> resolve(FastBoard& b, bool* valid) {
  std::vector<uint32_t> agreed;
  int late = -1;
  REQUIRE(b.try_resolve(valid, &agreed, &late));
  return agreed;
}

}  // namespace

TEST_CASE("fast board: a round agrees on the ids every rank holds, ascending", "[fast-board]") {
  Memory m(3, 1024);
  FastBoard a(m.data(), 0, 3, 1024), b(m.data(), 1, 3, 1024), c(m.data(), 2, 3, 1024);
  const std::vector<uint32_t> ia = {5, 900, 64, 3}, ib = {3, 64, 900, 7}, ic = {900, 3, 64, 1023};
  a.publish(0, ia);
  CHECK(a.open());
  CHECK(b.peer_ahead());
  CHECK(c.peer_ahead());
  bool valid = false;
  std::vector<uint32_t> agreed;
  int late = -1;
  CHECK_FALSE(a.try_resolve(&valid, &agreed, &late));
  CHECK(late == 1);
  b.publish(0, ib);
  CHECK_FALSE(a.try_resolve(&valid, &agreed, &late));
  CHECK(late == 2);
  c.publish(0, ic);
  for (FastBoard* x : {&a, &b, &c}) {
    CHECK(resolve(*x, &valid) == std::vector<uint32_t>{3, 64, 900});
    CHECK(valid);
    CHECK_FALSE(x->open());
    CHECK(x->round() == 1);
    CHECK_FALSE(x->peer_ahead());
  }
}

TEST_CASE("fast board: ranks that started different lists agree on nothing", "[fast-board]") {
  Memory m(2, 128);
  FastBoard a(m.data(), 0, 2, 128), b(m.data(), 1, 2, 128);
  const std::vector<uint32_t> ids = {1, 2, 3};
  a.publish(4, ids);
  b.publish(5, ids);
  bool valid = true;
  CHECK(resolve(a, &valid).empty());
  CHECK_FALSE(valid);
  CHECK(resolve(b, &valid).empty());
  CHECK_FALSE(valid);
  // The next round, with the lists caught up, agrees; the parity slot of round 1 is reused
  // in round 3 with fewer ids, and stale bits must not survive.
  a.publish(5, ids);
  b.publish(5, ids);
  CHECK(resolve(a, &valid) == ids);
  CHECK(valid);
  resolve(b, &valid);
  const std::vector<uint32_t> fewer = {2};
  a.publish(5, fewer);
  b.publish(5, ids);
  CHECK(resolve(a, &valid) == fewer);
  CHECK(resolve(b, &valid) == fewer);
}

TEST_CASE("fast board: an empty record (a rank inside a list) agrees on nothing", "[fast-board]") {
  Memory m(2, 64);
  FastBoard a(m.data(), 0, 2, 64), b(m.data(), 1, 2, 64);
  const std::vector<uint32_t> ids = {0, 63};
  a.publish(2, ids);
  b.publish(2, {});
  bool valid = false;
  CHECK(resolve(a, &valid).empty());
  CHECK(valid);
  CHECK(resolve(b, &valid).empty());
  // Ids at or beyond the capacity are left out, not written past the record.
  const std::vector<uint32_t> big = {0, 64, 1000000};
  a.publish(2, big);
  b.publish(2, big);
  CHECK(resolve(a, &valid) == std::vector<uint32_t>{0});
  CHECK(resolve(b, &valid) == std::vector<uint32_t>{0});
}

TEST_CASE("fast board: leave is seen by peers", "[fast-board]") {
  Memory m(3, 64);
  FastBoard a(m.data(), 0, 3, 64), b(m.data(), 1, 3, 64);
  int who = -1;
  CHECK_FALSE(a.peer_left(&who));
  b.leave();
  CHECK(a.peer_left(&who));
  CHECK(who == 1);
  CHECK_FALSE(b.peer_left(&who));
}

TEST_CASE("fast board: threads running many rounds reach the same verdicts", "[fast-board]") {
  // Each of 4 ranks holds a pseudo-random subset of 200 ids per round and sometimes starts a
  // list (its list count differs until the others catch up). Every rank records each
  // round's verdict; all records must be identical, and each agreed set must be exactly the
  // intersection of the published sets.
  constexpr int kRanks = 4, kRounds = 2000;
  constexpr size_t kCap = 200;
  Memory m(kRanks, kCap);
  struct Verdict {
    bool valid;
    std::vector<uint32_t> agreed;
    bool operator==(const Verdict&) const = default;
  };
  std::vector<std::vector<Verdict>> seen(kRanks);
  std::vector<std::vector<std::vector<uint32_t>>> offered(kRanks, std::vector<std::vector<uint32_t>>(kRounds));
  std::vector<std::vector<uint64_t>> lists(kRanks, std::vector<uint64_t>(kRounds));
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      FastBoard board(m.data(), r, kRanks, kCap);
      uint32_t state = 12345u + static_cast<uint32_t>(r) * 7919u;
      auto next = [&] { return state = state * 1664525u + 1013904223u; };
      for (int k = 0; k < kRounds && !failed; ++k) {
        std::vector<uint32_t> ids;
        for (uint32_t id = 0; id < kCap; ++id)
          if (next() % 4 != 0) ids.push_back(id);
        offered[r][k] = ids;
        lists[r][k] = static_cast<uint64_t>(k / 3) + ((next() % 16 == 0) ? 1 : 0);
        board.publish(lists[r][k], ids);
        Verdict v{};
        int late = -1;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!board.try_resolve(&v.valid, &v.agreed, &late)) {
          if (std::chrono::steady_clock::now() > deadline) {
            failed = true;
            return;
          }
          std::this_thread::yield();
        }
        seen[r].push_back(v);
      }
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE_FALSE(failed);
  for (int r = 1; r < kRanks; ++r) CHECK(seen[r] == seen[0]);
  int valid_rounds = 0;
  for (int k = 0; k < kRounds; ++k) {
    bool same_lists = true;
    for (int r = 1; r < kRanks; ++r) same_lists = same_lists && lists[r][k] == lists[0][k];
    std::vector<uint32_t> expect;
    if (same_lists)
      for (uint32_t id : offered[0][k]) {
        bool all = true;
        for (int r = 1; r < kRanks; ++r)
          all = all && std::find(offered[r][k].begin(), offered[r][k].end(), id) != offered[r][k].end();
        if (all) expect.push_back(id);
      }
    CHECK(seen[0][k].valid == same_lists);
    CHECK(seen[0][k].agreed == expect);
    valid_rounds += same_lists;
  }
  CHECK(valid_rounds > kRounds / 4);
  CHECK(valid_rounds < kRounds);
}

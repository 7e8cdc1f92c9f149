// The response cache of a process set (core/response_cache.h, docs/collectives.md "Process
// sets"): a set's repeated collectives reach rank 0 by cache id after their first step,
// counted exactly on rank 0 (RuntimeStats::peer_set_requests_*), with two sets and the
// global set running at once; a member whose request changes still fails on every member
// and the set goes on by id; a removed and re-created set starts with an empty cache; a full
// cache (KOLO_CACHE_CAPACITY) takes no more names. Results are exact throughout.
#include <algorithm>
#include <thread>

#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

std::vector<int> ranks_where(bool (*keep)(int, int)) {
  std::vector<int> out;
  for (int r = 0; r < size(); ++r)
    if (keep(r, size())) out.push_back(r);
  return out;
}

int peers_of_root(const std::vector<int>& members) {
  return static_cast<int>(std::count_if(members.begin(), members.end(), [](int r) { return r != 0; }));
}

// Rank 0's counts of its peers' set requests (zero elsewhere). Read before a barrier that
// starts the set's work (a peer may send its first request as soon as its barrier returns)
// and after one that ends it (every request of the work has reached rank 0 by then).
struct SetCounts {
  uint64_t by_id = 0, full = 0;
  static SetCounts now() {
    const RuntimeStats s = runtime_stats();
    return {s.peer_set_requests_cached, s.peer_set_requests_full};
  }
  SetCounts operator-(const SetCounts& o) const { return {by_id - o.by_id, full - o.full}; }
};

uint64_t cache_capacity() { return runtime_stats().cache_capacity; }

int64_t sum_of(const std::vector<int>& v) {
  int64_t s = 0;
  for (int x : v) s += x;
  return s;
}

// One step of a set: allreduce x2, broadcast, reducescatter, a grouped allreduce of two,
// alltoall (never named by id) and allgather (never cached); every result checked exactly.
// Returns the number of wrong values.
size_t one_step(const ProcessSet& set, const std::vector<int>& members, int step) {
  const int me = set.rank(), n = set.size();
  const AllreduceOptions sum{ReduceOp::kSum, 1.0, 1.0, set};
  std::vector<float> ar(6, static_cast<float>(rank() + step));
  std::vector<int32_t> ar2(3, rank());
  std::vector<int64_t> bc(5, rank() * 10 + step);
  std::vector<int32_t> rs(static_cast<size_t>(2 * n + 1) * 2, rank() + 1);
  std::vector<int32_t> g0(2, 1), g1(7, rank());
  std::vector<int64_t> splits, send;
  for (int j = 0; j < n; ++j) {
    splits.push_back(1 + (j + step) % 2);
    send.insert(send.end(), static_cast<size_t>(splits.back()), 100 * me + j);
  }
  std::vector<int32_t> rows(static_cast<size_t>(me + 1), rank());
  std::vector<Handle> hs;
  hs.push_back(allreduce_async(TensorView::of(ar), "psc.ar", sum));
  hs.push_back(allreduce_async(TensorView::of(ar2), "psc.ar2", sum));
  hs.push_back(broadcast_async(TensorView::of(bc), members.back(), "psc.bc", set));
  hs.push_back(reducescatter_async(TensorView::of(rs.data(), {2 * n + 1, 2}), "psc.rs", sum));
  hs.push_back(grouped_allreduce_async({TensorView::of(g0), TensorView::of(g1)}, "psc.grp", sum));
  hs.push_back(alltoall_async(TensorView::of(send), splits, "psc.a2a", set));
  hs.push_back(allgather_async(TensorView::of(rows), "psc.ag", set));
  for (const Handle& h : hs) wait_ok(h);
  size_t wrong = 0;
  const int64_t members_sum = sum_of(members);
  for (float x : ar) wrong += x != static_cast<float>(members_sum + static_cast<int64_t>(n) * step);
  for (int32_t x : ar2) wrong += x != members_sum;
  for (int64_t x : bc) wrong += x != members.back() * 10 + step;
  const Tensor& part = hs[3].output();
  for (int64_t i = 0; i < num_elements(part.shape); ++i) wrong += part.data<int32_t>()[i] != members_sum + n;
  for (int32_t x : g0) wrong += x != n;
  for (int32_t x : g1) wrong += x != members_sum;
  const Tensor& a = hs[5].output();
  for (int k = 0, at = 0; k < n; ++k)
    for (int i = 0; i < 1 + (me + step) % 2; ++i, ++at) wrong += a.data<int64_t>()[at] != 100 * k + me;
  const Tensor& g = hs[6].output();
  wrong += g.shape[0] != static_cast<int64_t>(n) * (n + 1) / 2;
  return wrong;
}
constexpr int kByIdPerStep = 6;  // ar, ar2, bc, rs and the group's two members
constexpr int kFullPerStep = 2;  // alltoall and allgather
constexpr int kNamesCached = 7;  // all but allgather take a cache entry

}  // namespace

TEST_CASE("process set cache: repeated collectives go by id after the first step, two sets and the global set at once",
          "[process-sets]") {
  const std::vector<int> even = ranks_where([](int r, int) { return r % 2 == 0; });
  const std::vector<int> odd = ranks_where([](int r, int) { return r % 2 == 1; });
  const ProcessSet a = add_process_set(even);
  const ProcessSet b = add_process_set(odd);
  const ProcessSet& mine = rank() % 2 == 0 ? a : b;
  const std::vector<int>& members = rank() % 2 == 0 ? even : odd;
  const SetCounts before = SetCounts::now();  // before the barrier: a peer may start right after
  barrier("psc.start");
  int global_wrong = 0;  // checked after the join: Catch2's assertions are not thread-safe
  std::thread global([&global_wrong] {
    for (int k = 0; k < 40; ++k) {
      std::vector<int32_t> v(9, 1);
      allreduce(TensorView::of(v), "psc.global." + std::to_string(k % 4), {ReduceOp::kSum});
      global_wrong += v != std::vector<int32_t>(9, size());
    }
  });
  constexpr int kSteps = 4;
  size_t wrong = 0;
  for (int step = 0; step < kSteps; ++step) wrong += one_step(mine, members, step);
  global.join();
  CHECK(global_wrong == 0);
  CHECK(wrong == 0);
  barrier("psc.end");
  if (rank() == 0) {
    const SetCounts d = SetCounts::now() - before;
    const uint64_t peers = static_cast<uint64_t>(peers_of_root(even) + peers_of_root(odd));
    const uint64_t total = kSteps * (kByIdPerStep + kFullPerStep) * peers;
    INFO("by id " << d.by_id << ", in full " << d.full << ", capacity " << cache_capacity());
    CHECK(d.by_id + d.full == total);
    if (cache_capacity() >= kNamesCached)
      CHECK(d.by_id == (kSteps - 1) * kByIdPerStep * peers);
    else if (cache_capacity() == 0)
      CHECK(d.by_id == 0);
    else  // which names a small cache took depends on the order of the first step
      CHECK(d.by_id <= (kSteps - 1) * kByIdPerStep * peers);
  }
  barrier("psc.counted");
  remove_process_set(a);
  remove_process_set(b);
}

TEST_CASE("process set cache: a member whose request changed fails on every member; cached ids go on after",
          "[process-sets]") {
  // A set where rank 0's own request changes (it reaches the table directly; its peers'
  // come by id) and a set without rank 0, where the last member's changes.
  const std::vector<std::vector<int>> sets = {ranks_where([](int r, int n) { return r == 0 || r == n - 1; }),
                                              ranks_where([](int r, int) { return r > 0; })};
  for (size_t which = 0; which < sets.size(); ++which) {
    const std::vector<int>& members = sets[which];
    const int odd_rank = which == 0 ? members.front() : members.back();
    const ProcessSet set = add_process_set(members);
    const SetCounts before = SetCounts::now();
    barrier("psc.mm.start");
    const AllreduceOptions sum{ReduceOp::kSum, 1.0, 1.0, set};
    const bool odd_one = rank() == odd_rank;
    const int64_t members_sum = sum_of(members);
    if (set.included()) {
      for (int step = 0; step < 2; ++step) {  // the second step goes by id
        std::vector<float> v(4, static_cast<float>(rank()));
        allreduce(TensorView::of(v), "psc.mm", sum);
        CHECK(v == std::vector<float>(4, static_cast<float>(members_sum)));
        std::vector<int32_t> w(3, rank());
        broadcast(TensorView::of(w), members.front(), "psc.mm.bc", set);
        CHECK(w == std::vector<int32_t>(3, members.front()));
      }
      if (set.size() >= 2) {
        std::vector<float> v5(odd_one ? 5 : 4, 1.0f);
        const std::string e = wait_error(allreduce_async(TensorView::of(v5), "psc.mm", sum));
        CHECK_THAT(e, Catch::Contains("[4] on rank"));
        CHECK_THAT(e, Catch::Contains("[5] on rank " + std::to_string(odd_rank)));
        CHECK_THAT(e, Catch::Contains("process set " + std::to_string(set.id())));
        std::vector<float> f(4, 1.0f);
        std::vector<int32_t> i(4, 1);
        const std::string ed = wait_error(allreduce_async(odd_one ? TensorView::of(i) : TensorView::of(f), "psc.mm", sum));
        CHECK_THAT(ed, Catch::Contains("dtype"));
        std::vector<int32_t> w(3, rank());
        const std::string er =
            wait_error(broadcast_async(TensorView::of(w), odd_one ? members.back() : members.front(), "psc.mm.bc", set));
        CHECK_THAT(er, Catch::Contains("root"));
      }
      // The errors were not remembered: every member's cache still holds the agreed
      // requests, so this step goes by id again, with exact results.
      std::vector<float> v(4, 2.0f);
      allreduce(TensorView::of(v), "psc.mm", sum);
      CHECK(v == std::vector<float>(4, 2.0f * static_cast<float>(set.size())));
      std::vector<int32_t> w(3, rank());
      broadcast(TensorView::of(w), members.front(), "psc.mm.bc", set);
      CHECK(w == std::vector<int32_t>(3, members.front()));
    }
    barrier("psc.mm.end");
    if (rank() == 0 && cache_capacity() >= 2) {
      const SetCounts d = SetCounts::now() - before;
      const uint64_t peers = static_cast<uint64_t>(peers_of_root(members));
      const uint64_t errors = members.size() >= 2 ? 3 : 0;
      INFO("set of " << members.size() << ": by id " << d.by_id << ", in full " << d.full);
      // Step 1 in full; step 2 and the last step by id; each failing step: the changed
      // request in full from its rank (if not rank 0), the others' by id.
      const uint64_t changed_by_peer = odd_rank != 0 ? 1 : 0;
      CHECK(d.full == 2 * peers + errors * changed_by_peer);
      CHECK(d.by_id == 2 * 2 * peers + errors * (peers - changed_by_peer));
    }
    remove_process_set(set);
  }
}

TEST_CASE("process set cache: a set removed and made again with the same ranks starts empty", "[process-sets]") {
  const std::vector<int> members = ranks_where([](int r, int) { return r > 0; });
  const uint64_t peers = static_cast<uint64_t>(peers_of_root(members));
  int32_t last_id = 0;
  for (int round = 0; round < 2; ++round) {
    const ProcessSet set = add_process_set(members);
    CHECK(set.id() != last_id);
    last_id = set.id();
    for (int step = 0; step < 2; ++step) {
      const SetCounts before = SetCounts::now();
      barrier("psc.again.step");
      if (set.included()) {
        for (const char* name : {"psc.again.a", "psc.again.b", "psc.again.c"}) {
          std::vector<int64_t> v(5, rank() + step);
          allreduce(TensorView::of(v), name, {ReduceOp::kSum, 1.0, 1.0, set});
          CHECK(v == std::vector<int64_t>(5, sum_of(members) + static_cast<int64_t>(set.size()) * step));
        }
      }
      barrier("psc.again.counted");
      if (rank() == 0 && cache_capacity() >= 3) {
        const SetCounts d = SetCounts::now() - before;
        INFO("round " << round << " step " << step);
        CHECK(d.by_id == (step == 0 ? 0 : 3 * peers));  // the first step of each round in full
        CHECK(d.full == (step == 0 ? 3 * peers : 0));
      }
    }
    remove_process_set(set);
  }
}

TEST_CASE("process set cache: each set's cache holds KOLO_CACHE_CAPACITY names, then no more", "[process-sets]") {
  const std::vector<int> all = ranks_where([](int, int) { return true; });
  const std::vector<int> tail = ranks_where([](int r, int) { return r > 0; });
  const ProcessSet whole = add_process_set(all);  // every rank, but not the global set
  const ProcessSet rest = add_process_set(tail);
  constexpr int kNames = 6, kSteps = 3;
  const SetCounts before = SetCounts::now();
  barrier("psc.cap.start");
  size_t wrong = 0;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<Handle> hs;
    std::vector<std::vector<int32_t>> bufs;
    bufs.reserve(2 * kNames);
    for (const ProcessSet* set : {&whole, &rest}) {
      if (!set->included()) continue;
      // A rank runs one collective per name at a time: each set its own names.
      const std::string prefix = set == &whole ? "psc.cap.whole." : "psc.cap.rest.";
      for (int k = 0; k < kNames; ++k) {
        bufs.emplace_back(static_cast<size_t>(2 + k), rank() * 100 + k + step);
        hs.push_back(allreduce_async(TensorView::of(bufs.back()), prefix + std::to_string(k),
                                     {ReduceOp::kSum, 1.0, 1.0, *set}));
      }
    }
    for (const Handle& h : hs) wait_ok(h);
    size_t at = 0;
    for (const auto* m : {&all, &tail}) {
      if (std::find(m->begin(), m->end(), rank()) == m->end()) continue;
      for (int k = 0; k < kNames; ++k, ++at)
        for (int32_t x : bufs[at]) wrong += x != sum_of(*m) * 100 + static_cast<int64_t>(m->size()) * (k + step);
    }
  }
  CHECK(wrong == 0);
  barrier("psc.cap.end");
  if (rank() == 0) {
    const SetCounts d = SetCounts::now() - before;
    const uint64_t peers = static_cast<uint64_t>(peers_of_root(all) + peers_of_root(tail));
    const uint64_t cached = std::min<uint64_t>(cache_capacity(), kNames);  // per set, whatever the order
    INFO("capacity " << cache_capacity() << ": by id " << d.by_id << ", in full " << d.full);
    CHECK(d.by_id == (kSteps - 1) * cached * peers);
    CHECK(d.full == kSteps * kNames * peers - d.by_id);
  }
  barrier("psc.cap.counted");
  remove_process_set(whole);
  remove_process_set(rest);
}

TEST_CASE("process sets: sets made while the global set runs on the fast path's board", "[process-sets]") {
  // A set's first collective makes its communicator; its members meet first. A member that
  // has not come yet may be in a board round that waits for a member already meeting: the
  // meeting answers the board, else both wait forever (without it this test hung at once).
  const std::vector<int> tail = ranks_where([](int r, int) { return r > 0; });
  const std::vector<int> odd = ranks_where([](int r, int) { return r % 2 == 1; });
  size_t wrong = 0, global_wrong = 0;
  for (int round = 0; round < 8; ++round) {
    std::thread global([&global_wrong] {
      for (int k = 0; k < 30; ++k) {
        std::vector<int32_t> v(4, 1);
        allreduce(TensorView::of(v), "psb.global", {ReduceOp::kSum});  // one name: the board's
        global_wrong += v != std::vector<int32_t>(4, size());
      }
    });
    const std::vector<int>& members = round % 2 == 0 ? tail : odd;
    const ProcessSet set = add_process_set(members);
    if (set.included()) {
      std::vector<int64_t> v(3, rank());
      allreduce(TensorView::of(v), "psb.first", {ReduceOp::kSum, 1.0, 1.0, set});
      wrong += v != std::vector<int64_t>(3, sum_of(members));
    }
    global.join();
    barrier("psb.round");
    remove_process_set(set);
  }
  CHECK(wrong == 0);
  CHECK(global_wrong == 0);
}

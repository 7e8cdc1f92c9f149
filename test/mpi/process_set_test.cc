// Process sets (kolo/process_set.h): every collective on a subset of the ranks with exact
// results, sets running concurrently with each other and with the global set, the errors
// (a rank outside the set, disagreeing members, bad add/remove calls) on every rank of the
// set and the runtime usable afterwards, and random sequences mixing sets and kinds.
#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "mpi_signal.h"
#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

std::vector<int> ranks_where(bool (*keep)(int, int)) {
  std::vector<int> out;
  for (int r = 0; r < size(); ++r)
    if (keep(r, size())) out.push_back(r);
  return out;
}

// Fills `b` with input_value(seed, rank(), i) and returns its view shaped `shape`.
TensorView filled(Buffer& b, uint64_t seed, ReduceOp op, Shape shape) {
  for (size_t i = 0; i < b.count(); ++i) b.put(i, input_value(seed, rank(), i, b.dtype, op));
  return b.view(std::move(shape));
}

}  // namespace

TEST_CASE("process sets: registry, ranks and membership agree with the arguments", "[process-sets]") {
  const ProcessSet tail = add_process_set(ranks_where([](int r, int) { return r > 0; }));
  CHECK(tail.id() > 0);
  CHECK(tail.size() == size() - 1);
  CHECK(tail.included() == (rank() > 0));
  CHECK(tail.rank() == rank() - 1);
  CHECK(global_process_set().size() == size());
  CHECK(global_process_set().rank() == rank());
  const auto all = process_sets();
  REQUIRE(all.size() >= 2);
  CHECK(all.front().id() == 0);
  CHECK(std::find(all.begin(), all.end(), tail) != all.end());
  remove_process_set(tail);
  const auto after = process_sets();
  CHECK(std::find(after.begin(), after.end(), tail) == after.end());
}

TEST_CASE("process sets: every collective kind on a set without rank 0, exact results", "[process-sets]") {
  // Rank 0 negotiates for a set it is not in; at np 2 the set is a single rank.
  const std::vector<int> members = ranks_where([](int r, int) { return r > 0; });
  const ProcessSet set = add_process_set(members);
  if (set.included()) {
    const int me = set.rank(), n = set.size();
    for (DType t : {DType::kInt32, DType::kFloat32, DType::kFloat16}) {
      for (ReduceOp op : all_reduce_ops()) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{1027}}) {
          Buffer b(t, count);
          const std::string name =
              "ps.ar." + std::string(dtype_name(t)) + reduce_op_name(op).data() + std::to_string(count);
          wait_ok(allreduce_async(filled(b, 7, op, {static_cast<int64_t>(count)}), name, {op, 1.0, 1.0, set}));
          size_t wrong = 0;
          for (size_t i = 0; i < count; ++i) {
            const double e = expected_over(members, 7, i, t, op);
            wrong += std::abs(b.at(i) - e) > tolerance(t, e);
          }
          INFO(name);
          CHECK(wrong == 0);
        }
      }
    }
    // Broadcast from each member (roots are job ranks).
    for (int root : members) {
      std::vector<int64_t> v(33, rank());
      broadcast(TensorView::of(v), root, "ps.bc." + std::to_string(root), set);
      CHECK(std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == root; }));
    }
    // Allgather: set rank k contributes k + 1 rows of its job rank, in set order.
    std::vector<int32_t> rows(static_cast<size_t>(me + 1) * 2, rank());
    const Tensor g = allgather(TensorView::of(rows.data(), {me + 1, 2}), "ps.ag", set);
    CHECK(g.shape[0] == n * (n + 1) / 2);
    std::vector<int32_t> want;
    for (int k = 0; k < n; ++k) want.insert(want.end(), static_cast<size_t>(k + 1) * 2, members[k]);
    CHECK(std::vector<int32_t>(g.data<int32_t>(), g.data<int32_t>() + want.size()) == want);
    // Alltoall: set rank k sends j + 1 rows (of value 100k + j) to set rank j.
    std::vector<int64_t> splits, send;
    for (int j = 0; j < n; ++j) {
      splits.push_back(j + 1);
      send.insert(send.end(), static_cast<size_t>(j + 1), 100 * me + j);
    }
    std::vector<int64_t> received;
    const Tensor a = alltoall(TensorView::of(send), splits, "ps.a2a", &received, set);
    CHECK(received == std::vector<int64_t>(static_cast<size_t>(n), me + 1));
    size_t wrong = 0;
    for (int k = 0, at = 0; k < n; ++k)
      for (int i = 0; i <= me; ++i, ++at) wrong += a.data<int64_t>()[at] != 100 * k + me;
    CHECK(wrong == 0);
    // Reducescatter: set rank k gets its rows of the sum over the members.
    Buffer rs(DType::kFloat32, static_cast<size_t>(2 * n + 1) * 3);
    const Tensor part =
        reducescatter(filled(rs, 9, ReduceOp::kSum, {2 * n + 1, 3}), "ps.rs", {ReduceOp::kSum, 1.0, 1.0, set});
    int64_t first = 0;
    const int64_t mine = reducescatter_rows(2 * n + 1, n, me, &first);
    REQUIRE(part.shape[0] == mine);
    wrong = 0;
    for (size_t i = 0; i < static_cast<size_t>(mine) * 3; ++i)
      wrong += part.data<float>()[i] !=
               expected_over(members, 9, static_cast<size_t>(first) * 3 + i, DType::kFloat32, ReduceOp::kSum);
    CHECK(wrong == 0);
    // Grouped allreduce and allgather, and a barrier.
    std::vector<int32_t> g0(5, rank()), g1(70, 1);
    grouped_allreduce({TensorView::of(g0), TensorView::of(g1)}, "ps.grp", {ReduceOp::kSum, 1.0, 1.0, set});
    int32_t sum = 0;
    for (int r : members) sum += r;
    CHECK(g0 == std::vector<int32_t>(5, sum));
    CHECK(g1 == std::vector<int32_t>(70, n));
    const auto gg = grouped_allgather({TensorView::of(g0)}, "ps.grp.ag", set);
    CHECK(gg.at(0).shape[0] == 5 * n);
    barrier("ps.barrier", set);
  }
  barrier("ps.kinds.done");
  remove_process_set(set);
}

TEST_CASE("process sets: a rank outside the set is refused at once, naming set and rank", "[process-sets]") {
  const ProcessSet set = add_process_set(ranks_where([](int r, int) { return r > 0; }));
  if (!set.included()) {
    std::vector<float> v(4, 1.0f);
    const std::string e = wait_error(allreduce_async(TensorView::of(v), "ps.outsider", {ReduceOp::kSum, 1, 1, set}), 1);
    CHECK_THAT(e, Catch::Contains("rank 0 is not in process set " + std::to_string(set.id())));
    const std::string e2 = wait_error(allgather_async(TensorView::of(v), "ps.outsider.ag", set), 1);
    CHECK_THAT(e2, Catch::Contains("is not in process set"));
  } else {
    // A broadcast root outside the set is refused on the members, at once.
    std::vector<float> v(4, 1.0f);
    const std::string e = wait_error(broadcast_async(TensorView::of(v), 0, "ps.badroot", set), 1);
    CHECK_THAT(e, Catch::Contains("root 0 is not in process set"));
  }
  barrier("ps.outsider.done");
  remove_process_set(set);
  std::vector<float> v(2, 1.0f);
  const std::string gone = wait_error(allreduce_async(TensorView::of(v), "ps.removed", {ReduceOp::kSum, 1, 1, set}), 1);
  CHECK_THAT(gone, Catch::Contains("is not registered"));
}

TEST_CASE("process sets: members that disagree fail on every member, and the set stays usable", "[process-sets]") {
  const std::vector<int> members = ranks_where([](int r, int n) { return r % 2 == (n > 2 ? 1 : 0) || r == n - 1; });
  const ProcessSet set = add_process_set(members);
  if (set.included() && set.size() >= 2) {
    // The last member passes another shape; every member fails naming the job ranks.
    const bool odd_one = rank() == members.back();
    std::vector<float> v(odd_one ? 5 : 4, 1.0f);
    const std::string e = wait_error(allreduce_async(TensorView::of(v), "ps.mismatch", {ReduceOp::kSum, 1, 1, set}));
    CHECK_THAT(e, Catch::Contains("shape [4] on rank"));
    CHECK_THAT(e, Catch::Contains("[5] on rank " + std::to_string(members.back())));
    CHECK_THAT(e, Catch::Contains("process set " + std::to_string(set.id())));
    // Grouped: the last member announces a group of another size.
    std::vector<int32_t> a(3, 1), b(3, 1);
    std::vector<TensorView> views{TensorView::of(a)};
    if (!odd_one) views.push_back(TensorView::of(b));
    const std::string eg = wait_error(grouped_allreduce_async(views, "ps.grp.mismatch", {ReduceOp::kSum, 1, 1, set}));
    CHECK_THAT(eg, Catch::Contains("group size"));
    // Alltoall: the last member gives one split too many.
    std::vector<int64_t> splits(static_cast<size_t>(set.size() + (odd_one ? 1 : 0)), 1);
    std::vector<int64_t> rows(splits.size(), 1);
    const std::string ea = wait_error(alltoall_async(TensorView::of(rows), splits, "ps.a2a.mismatch", set));
    CHECK_THAT(ea, Catch::Contains("rank " + std::to_string(members.back()) + " gave " +
                                   std::to_string(set.size() + 1) + " splits"));
    CHECK_THAT(ea, Catch::Contains("for " + std::to_string(set.size()) + " ranks"));
    // Usable afterwards.
    std::vector<int32_t> ok(3, 1);
    allreduce(TensorView::of(ok), "ps.after", {ReduceOp::kSum, 1, 1, set});
    CHECK(ok == std::vector<int32_t>(3, set.size()));
  }
  std::vector<int32_t> all(2, 1);
  allreduce(TensorView::of(all), "ps.after.global", {ReduceOp::kSum});
  CHECK(all == std::vector<int32_t>(2, size()));
  remove_process_set(set);
}

TEST_CASE("process sets: one name on two sets that wait for each other fails at once on both", "[process-sets]") {
  // Rank 0 submits the name on the global set and rank 1 on the set {0,1}: the global set
  // waits for rank 1 and the set for rank 0, and each of them holds the name in flight on the
  // other set. Without the check this stalled until the stall inspector named it.
  const ProcessSet pair = add_process_set({0, 1});
  std::vector<float> v(4, 1.0f);
  if (rank() <= 1) {
    const auto start = std::chrono::steady_clock::now();
    const Handle h = rank() == 0 ? allreduce_async(TensorView::of(v), "ps.two.sets", {ReduceOp::kSum})
                                 : allreduce_async(TensorView::of(v), "ps.two.sets", {ReduceOp::kSum, 1, 1, pair});
    const std::string e = wait_error(h, 45);
    // Sooner than the stall inspector (60 s); generous for a loaded machine.
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
    CHECK_THAT(e, Catch::Contains("allreduce \"ps.two.sets\": submitted on"));
    CHECK_THAT(e, Catch::Contains("process set " + std::to_string(pair.id()) + " (ranks 0,1)"));
    CHECK_THAT(e, Catch::Contains("the global process set"));
    CHECK_THAT(e, Catch::Contains("by rank 0"));
    CHECK_THAT(e, Catch::Contains("by rank 1"));
  }
  // Usable afterwards: the set, the global set, and the name itself on one set.
  std::vector<int32_t> one(2, 1);
  if (pair.included()) {
    allreduce(TensorView::of(one), "ps.two.sets", {ReduceOp::kSum, 1, 1, pair});
    CHECK(one == std::vector<int32_t>(2, 2));
  }
  std::vector<int32_t> all(2, 1);
  allreduce(TensorView::of(all), "ps.two.sets.after", {ReduceOp::kSum});
  CHECK(all == std::vector<int32_t>(2, size()));
  remove_process_set(pair);
}

TEST_CASE("process sets: one name pending on three sets in a cycle fails at once on all three", "[process-sets]") {
  // Rank 0 submits the name on {0,1}, rank 1 on {1,2}, rank 2 on {0,2}: each set waits for a
  // rank that holds the name on the next one. No two of them wait for each other, so the
  // pairwise check missed it and this stalled until the stall inspector (finding 21).
  if (size() < 3) return;
  const ProcessSet p01 = add_process_set({0, 1}), p12 = add_process_set({1, 2}), p02 = add_process_set({0, 2});
  std::vector<float> v(4, 1.0f);
  if (rank() <= 2) {
    const ProcessSet& mine = rank() == 0 ? p01 : rank() == 1 ? p12 : p02;
    const auto start = std::chrono::steady_clock::now();
    const Handle h = allreduce_async(TensorView::of(v), "ps.cycle", {ReduceOp::kSum, 1, 1, mine});
    const std::string e = wait_error(h, 45);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));  // not the stall inspector's 60 s
    CHECK_THAT(e, Catch::Contains("allreduce \"ps.cycle\": submitted on"));
    CHECK_THAT(e, Catch::Contains("process set " + std::to_string(p01.id()) + " (ranks 0,1) by rank 0"));
    CHECK_THAT(e, Catch::Contains("process set " + std::to_string(p12.id()) + " (ranks 1,2) by rank 1"));
    CHECK_THAT(e, Catch::Contains("process set " + std::to_string(p02.id()) + " (ranks 0,2) by rank 2"));
    CHECK(v == std::vector<float>(4, 1.0f));  // untouched
  }
  // The name works again afterwards, on one set.
  if (p01.included()) {
    std::vector<int32_t> one(2, 1);
    allreduce(TensorView::of(one), "ps.cycle", {ReduceOp::kSum, 1, 1, p01});
    CHECK(one == std::vector<int32_t>(2, 2));
  }
  std::vector<int32_t> all(2, 1);
  allreduce(TensorView::of(all), "ps.cycle.after", {ReduceOp::kSum});
  CHECK(all == std::vector<int32_t>(2, size()));
  for (const ProcessSet& s : {p01, p12, p02}) remove_process_set(s);
}

TEST_CASE("process sets: one name on several sets that do not wait in a cycle completes", "[process-sets]") {
  // Chains, not cycles: each set ends up complete, one after the other, and none may fail.
  // (1) Rank 0 submits on {0,1} and rank 1 on {1,2}; rank 2 comes to {1,2} only later, then
  // rank 1 goes on to {0,1}. (2) Ranks 0 and 1 run the name on {0,1} while rank 2 already
  // waits on {1,2}; rank 1 then joins it there.
  if (size() < 3) return;
  const ProcessSet p01 = add_process_set({0, 1}), p12 = add_process_set({1, 2});
  const auto opts = [](const ProcessSet& s) { return AllreduceOptions{ReduceOp::kSum, 1, 1, s}; };
  for (int round = 0; round < 2; ++round) {
    const std::string name = "ps.chain." + std::to_string(round);
    std::vector<float> a(4, 1.0f), b(4, 1.0f);
    if (rank() == 0) {
      Handle ha = allreduce_async(TensorView::of(a), name, opts(p01));
      if (round == 0) signal_rank(2);  // submitted on {0,1}
      wait_ok(ha);
      CHECK(a == std::vector<float>(4, 2.0f));
    } else if (rank() == 1) {
      if (round == 0) {
        Handle hb = allreduce_async(TensorView::of(b), name, opts(p12));
        signal_rank(2);  // waiting on {1,2}
        wait_ok(hb);
        allreduce(TensorView::of(a), name, opts(p01));
      } else {
        allreduce(TensorView::of(a), name, opts(p01));
        allreduce(TensorView::of(b), name, opts(p12));
      }
      CHECK(a == std::vector<float>(4, 2.0f));
      CHECK(b == std::vector<float>(4, 2.0f));
    } else if (rank() == 2) {
      if (round == 0) {  // rank 2 comes to {1,2} last
        await_signal(0);
        await_signal(1);
      }
      allreduce(TensorView::of(b), name, opts(p12));
      CHECK(b == std::vector<float>(4, 2.0f));
    }
  }
  std::vector<int32_t> all(2, 1);
  allreduce(TensorView::of(all), "ps.chain.after", {ReduceOp::kSum});
  CHECK(all == std::vector<int32_t>(2, size()));
  remove_process_set(p01);
  remove_process_set(p12);
}

TEST_CASE("process sets: bad add/remove calls fail on every rank, nothing changes", "[process-sets]") {
  const size_t before = process_sets().size();
  // Rank 0 passes other ranks than its peers.
  std::vector<int> ranks = {0, size() - 1};
  if (rank() == 0) ranks = {0};
  try {
    add_process_set(ranks);
    FAIL("add_process_set with disagreeing ranks succeeded");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("the ranks differ"));
  }
  CHECK(process_sets().size() == before);
  CHECK_THROWS_WITH(add_process_set({0, size()}), Catch::Contains("is not a rank of the job"));
  CHECK_THROWS_WITH(add_process_set({0, 0}), Catch::Contains("listed twice"));
  CHECK_THROWS_WITH(remove_process_set(global_process_set()), Catch::Contains("global set cannot be removed"));
  // Removing a set with a collective in flight on one rank: refused on every rank.
  const ProcessSet set = add_process_set({0, size() - 1});
  std::vector<int32_t> v(3, 1);
  Handle pending;
  if (rank() == 0) pending = allreduce_async(TensorView::of(v), "ps.pending", {ReduceOp::kSum, 1, 1, set});
  CHECK_THROWS_WITH(remove_process_set(set), Catch::Contains("rank(s) 0 still have collectives on it in flight"));
  if (rank() == size() - 1) allreduce(TensorView::of(v), "ps.pending", {ReduceOp::kSum, 1, 1, set});
  if (rank() == 0) {
    wait_ok(pending);
    CHECK(v == std::vector<int32_t>(3, size() > 1 ? 2 : 1));
  }
  remove_process_set(set);
  CHECK(process_sets().size() == before);
}

TEST_CASE("process sets: two disjoint sets x 1000 allreduces, concurrently with the global set", "[process-sets]") {
  const std::vector<int> even = ranks_where([](int r, int) { return r % 2 == 0; });
  const std::vector<int> odd = ranks_where([](int r, int) { return r % 2 == 1; });
  const ProcessSet a = add_process_set(even);
  const ProcessSet b = odd.empty() ? ProcessSet{} : add_process_set(odd);
  const ProcessSet& mine = rank() % 2 == 0 ? a : b;
  const std::vector<int>& members = rank() % 2 == 0 ? even : odd;
  // The global set runs on another thread meanwhile.
  std::vector<int64_t> global_wrong(1, 0);
  std::thread global([&] {
    for (int k = 0; k < 60; ++k) {
      std::vector<int64_t> v(17, rank() + k);
      allreduce(TensorView::of(v), "ps.cc.global." + std::to_string(k), {ReduceOp::kSum});
      const int64_t want = static_cast<int64_t>(size()) * (size() - 1) / 2 + static_cast<int64_t>(size()) * k;
      global_wrong[0] += std::count_if(v.begin(), v.end(), [&](int64_t x) { return x != want; });
    }
  });
  constexpr int kTotal = 1000, kInFlight = 50;
  size_t wrong = 0;
  int64_t member_sum = 0;
  for (int r : members) member_sum += r;
  std::vector<std::vector<int32_t>> bufs(kInFlight);
  for (int start = 0; start < kTotal; start += kInFlight) {
    std::vector<Handle> hs;
    for (int k = 0; k < kInFlight; ++k) {
      bufs[k].assign(3 + k % 5, rank() * 1000 + start + k);
      hs.push_back(allreduce_async(TensorView::of(bufs[k]), "ps.cc." + std::to_string(start + k),
                                   {ReduceOp::kSum, 1.0, 1.0, mine}));
    }
    for (int k = 0; k < kInFlight; ++k) {
      wait_ok(hs[k]);
      const int64_t want = member_sum * 1000 + static_cast<int64_t>(members.size()) * (start + k);
      wrong += std::count_if(bufs[k].begin(), bufs[k].end(), [&](int32_t x) { return x != want; });
    }
  }
  global.join();
  CHECK(wrong == 0);
  CHECK(global_wrong[0] == 0);
  barrier("ps.cc.done");
  remove_process_set(a);
  if (!odd.empty()) remove_process_set(b);
}

TEST_CASE("process sets: random sequences mixing every collective on two sets and the global set", "[process-sets]") {
  const std::vector<int> head = ranks_where([](int r, int n) { return r < (n + 1) / 2; });
  const std::vector<int> spread = ranks_where([](int r, int n) { return r % 2 == 0 || r == n - 1; });  // overlaps head
  const std::vector<ProcessSet> sets = {ProcessSet{}, add_process_set(head), add_process_set(spread)};
  const std::vector<std::vector<int>> members = {ranks_where([](int, int) { return true; }), head, spread};
  for (uint64_t seed : {11u, 22u}) {
    std::mt19937_64 shared(seed);  // the same sequence on every rank
    struct Op {
      int kind, set;
      size_t count;
      std::string name;
    };
    std::vector<Op> ops;
    for (int i = 0; i < 60; ++i)
      ops.push_back({static_cast<int>(shared() % 6), static_cast<int>(shared() % 3), 1 + shared() % 300,
                     "ps.rand." + std::to_string(seed) + "." + std::to_string(i)});
    std::vector<Handle> hs(ops.size());
    std::vector<Buffer> bufs;
    bufs.reserve(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& o = ops[i];
      bufs.emplace_back(DType::kInt32, o.count * 2);
      if (!contains(members[o.set], rank())) continue;
      const ProcessSet& s = sets[o.set];
      TensorView v = filled(bufs[i], i, ReduceOp::kSum, {static_cast<int64_t>(o.count), 2});
      switch (o.kind) {
        case 0:
          hs[i] = allreduce_async(v, o.name, {ReduceOp::kSum, 1, 1, s});
          break;
        case 1:
          hs[i] = broadcast_async(v, members[o.set].back(), o.name, s);
          break;
        case 2:
          hs[i] = allgather_async(v, o.name, s);
          break;
        case 3: {
          std::vector<int64_t> splits(static_cast<size_t>(s.size()), 0);
          splits[0] = static_cast<int64_t>(o.count);  // everything to the set's first rank
          hs[i] = alltoall_async(v, splits, o.name, s);
          break;
        }
        case 4:
          hs[i] = reducescatter_async(v, o.name, {ReduceOp::kSum, 1, 1, s});
          break;
        default:
          hs[i] = grouped_allreduce_async({v}, o.name, {ReduceOp::kSum, 1, 1, s});
          break;
      }
    }
    size_t wrong = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& o = ops[i];
      if (!contains(members[o.set], rank())) continue;
      wait_ok(hs[i]);
      const std::vector<int>& m = members[o.set];
      const size_t n = o.count * 2;
      const auto in = [&](int r, size_t k) { return input_value(i, r, k, DType::kInt32, ReduceOp::kSum); };
      switch (o.kind) {
        case 0:
        case 5:
          for (size_t k = 0; k < n; ++k)
            wrong += bufs[i].at(k) != expected_over(m, i, k, DType::kInt32, ReduceOp::kSum);
          break;
        case 1:
          for (size_t k = 0; k < n; ++k) wrong += bufs[i].at(k) != in(m.back(), k);
          break;
        case 2: {
          const Tensor& g = hs[i].gathered();
          for (size_t r = 0; r < m.size(); ++r)
            for (size_t k = 0; k < n; ++k) wrong += g.data<int32_t>()[r * n + k] != in(m[r], k);
          break;
        }
        case 3: {
          const Tensor& out = hs[i].output();
          const size_t expect_rows = sets[o.set].rank() == 0 ? o.count * m.size() : 0;
          wrong += static_cast<size_t>(out.shape[0]) != expect_rows;
          for (size_t r = 0; expect_rows && r < m.size(); ++r)
            for (size_t k = 0; k < n; ++k) wrong += out.data<int32_t>()[r * n + k] != in(m[r], k);
          break;
        }
        case 4: {
          const Tensor& out = hs[i].output();
          int64_t first = 0;
          const int64_t rows =
              reducescatter_rows(static_cast<int64_t>(o.count), sets[o.set].size(), sets[o.set].rank(), &first);
          wrong += out.shape[0] != rows;
          for (size_t k = 0; k < static_cast<size_t>(rows) * 2; ++k)
            wrong += out.data<int32_t>()[k] !=
                     expected_over(m, i, static_cast<size_t>(first) * 2 + k, DType::kInt32, ReduceOp::kSum);
          break;
        }
      }
    }
    INFO("seed " << seed);
    CHECK(wrong == 0);
  }
  barrier("ps.rand.done");
  remove_process_set(sets[1]);
  remove_process_set(sets[2]);
}

TEST_CASE("process sets: KOLO_PROCESS_SETS registers its sets at init", "[process-sets-env]") {
  // Run with KOLO_PROCESS_SETS="0,2" at np 3 (the parsing of several sets: unit tests).
  const auto all = process_sets();
  REQUIRE(all.size() == 2);
  CHECK(all[1].id() == 1);
  CHECK(all[1].ranks() == std::vector<int>{0, 2});
  if (all[1].included()) {
    std::vector<int32_t> v(4, 1);
    allreduce(TensorView::of(v), "ps.env", {ReduceOp::kSum, 1, 1, all[1]});
    CHECK(v == std::vector<int32_t>(4, 2));
  }
  barrier("ps.env.done");
}

TEST_CASE("process sets: a set's shared-memory executor leaves the job's arena (kolo/memory.h) alone",
          "[process-sets]") {
  // The arena belongs to the global set's executor; a set's executor has none. Making one
  // (at the set's first collective) and removing it must not unpublish the job's arena.
  const size_t capacity = shared_memory_capacity();
  const ProcessSet set = add_process_set(ranks_where([](int r, int) { return r > 0; }));
  if (set.included()) {
    std::vector<float> v(64, 1.0f);
    allreduce(TensorView::of(v), "arena-alone", {ReduceOp::kSum, 1.0, 1.0, set});
    CHECK(v[0] == static_cast<float>(set.size()));
    CHECK(shared_memory_capacity() == capacity);
  }
  remove_process_set(set);
  std::vector<float> w(1, 1.0f);
  allreduce(TensorView::of(w), "arena-alone-after");
  CHECK(shared_memory_capacity() == capacity);
  if (capacity > 0) {
    void* p = allocate_shared(4096);
    CHECK(p != nullptr);
    CHECK(release_shared(p));
  }
}

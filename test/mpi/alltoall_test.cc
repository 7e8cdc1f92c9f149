// Alltoall: per-destination splits that differ per rank (zeros included), the even split,
// every dtype, sizes 0 / 1 / odd / large; every rank checks exact values from seed and rank.
// Mismatches (splits that do not add up, a wrong number of splits, dtype or shape
// disagreements, an even split that does not divide) fail on every rank, and the runtime is
// usable afterwards.
#include <algorithm>
#include <random>
#include <thread>

#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

// Rows rank `src` sends to rank `dst` in case `seed`: 0..scale-1, zero for some pairs.
int64_t split_of(uint64_t seed, int src, int dst, int64_t scale) {
  const uint64_t k = seed * 7 + static_cast<uint64_t>(src) * 3 + static_cast<uint64_t>(dst) * 5;
  return k % 3 == 0 ? 0 : static_cast<int64_t>(k % static_cast<uint64_t>(scale));
}

std::vector<int64_t> splits_of(uint64_t seed, int src, int64_t scale) {
  std::vector<int64_t> s;
  for (int d = 0; d < size(); ++d) s.push_back(split_of(seed, src, d, scale));
  return s;
}

// Runs one alltoall of rows of `row` elements and checks what arrives, element by element.
void check_alltoall(uint64_t seed, DType t, int64_t scale, int64_t row, bool even) {
  const int me = rank(), n = size();
  std::vector<int64_t> mine = even ? std::vector<int64_t>(static_cast<size_t>(n), scale) : splits_of(seed, me, scale);
  int64_t rows = 0;
  for (int64_t v : mine) rows += v;
  Buffer in(t, static_cast<size_t>(rows * row));
  for (size_t i = 0; i < in.count(); ++i) in.put(i, input_value(seed, me, i, t, ReduceOp::kMax));
  const std::string name = "a2a." + std::to_string(seed) + "." + std::string(dtype_name(t)) + "." +
                           std::to_string(scale) + "." + std::to_string(row) + (even ? ".even" : "");
  Shape shape = row == 1 ? Shape{rows} : Shape{rows, row};
  Handle h = even ? alltoall_async(in.view(shape), name) : alltoall_async(in.view(shape), mine, name);
  wait_ok(h);
  const Tensor& out = h.output();
  const std::vector<int64_t>& got = h.received_splits();
  INFO(name);
  REQUIRE(got.size() == static_cast<size_t>(n));
  int64_t total = 0;
  for (int src = 0; src < n; ++src) {
    const int64_t expect = even ? scale : split_of(seed, src, me, scale);
    CHECK(got[src] == expect);
    total += expect;
  }
  Shape want = shape;
  want[0] = total;
  REQUIRE(out.shape == want);
  REQUIRE(out.dtype == t);
  size_t at = 0, wrong = 0;
  for (int src = 0; src < n; ++src) {
    // The block src sends to me starts after what it sends to ranks before me.
    int64_t offset = 0;
    for (int d = 0; d < me; ++d) offset += even ? scale : split_of(seed, src, d, scale);
    const int64_t count = (even ? scale : split_of(seed, src, me, scale)) * row;
    for (int64_t i = 0; i < count; ++i, ++at)
      wrong += get(out.bytes.data(), t, at) != input_value(seed, src, static_cast<size_t>(offset * row + i), t,
                                                           ReduceOp::kMax);
  }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("alltoall: uneven splits per rank, every dtype, sizes 0/1/odd", "[alltoall]") {
  for (DType t : all_dtypes()) {
    check_alltoall(1, t, 1, 1, false);   // zero or no rows per pair
    check_alltoall(2, t, 2, 1, false);   // 0 or 1 row
    check_alltoall(3, t, 7, 3, false);   // odd counts, rows of 3
    check_alltoall(4, t, 5, 1, true);    // even split
  }
}

TEST_CASE("alltoall: every split zero gives an empty result", "[alltoall]") {
  std::vector<float> none;
  std::vector<int64_t> zeros(static_cast<size_t>(size()), 0);
  Handle h = alltoall_async(TensorView::of(none.data(), {0, 4}), zeros, "a2a.empty");
  wait_ok(h);
  CHECK(h.output().shape == Shape{0, 4});
  CHECK(h.received_splits() == zeros);
}

TEST_CASE("alltoall: large blocks (several shared-memory steps)", "[alltoall]") {
  check_alltoall(5, DType::kFloat32, 200000, 3, false);  // up to ~2.4 MB per pair
  check_alltoall(6, DType::kUInt8, 1 << 20, 1, true);    // 1 MiB to every rank
}

TEST_CASE("alltoall: blocking forms", "[alltoall]") {
  const int n = size();
  std::vector<int32_t> v(static_cast<size_t>(2 * n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = rank() * 100 + static_cast<int32_t>(i);
  Tensor even = alltoall(TensorView::of(v), "a2a.blocking.even");
  REQUIRE(even.shape == Shape{2 * n});
  for (int src = 0; src < n; ++src)
    for (int k = 0; k < 2; ++k) CHECK(even.data<int32_t>()[2 * src + k] == src * 100 + 2 * rank() + k);
  // Everything to rank 0.
  std::vector<int64_t> splits(static_cast<size_t>(n), 0);
  splits[0] = 2 * n;
  std::vector<int64_t> received;
  Tensor all = alltoall(TensorView::of(v), splits, "a2a.blocking.gather", &received);
  REQUIRE(received.size() == static_cast<size_t>(n));
  CHECK(all.shape == Shape{rank() == 0 ? 2 * n * n : 0});
  for (int src = 0; src < n; ++src) CHECK(received[src] == (rank() == 0 ? 2 * n : 0));
}

TEST_CASE("alltoall: mismatches fail on every rank, naming the ranks and values", "[alltoall][errors]") {
  const int n = size(), me = rank();
  std::vector<float> v(static_cast<size_t>(4 * n), 1.0f);
  auto ok_after = [&](const std::string& tag) {
    Tensor t = alltoall(TensorView::of(v.data(), {4 * n}), "a2a.after." + tag);
    CHECK(t.shape == Shape{4 * n});
  };
  {
    // Rank 1's splits add up to one row more than it has.
    std::vector<int64_t> s(static_cast<size_t>(n), 4);
    if (me == 1) s[0] = 5;
    const std::string m = wait_error(alltoall_async(TensorView::of(v.data(), {4 * n}), s, "a2a.bad.sum"));
    CHECK_THAT(m, Catch::Contains("alltoall \"a2a.bad.sum\"") && Catch::Contains("rank 1 gave splits") &&
                      Catch::Contains("add up to " + std::to_string(4 * n + 1)));
    ok_after("sum");
  }
  {
    std::vector<int64_t> s(static_cast<size_t>(me == 0 ? n + 1 : n), 4);
    if (me == 0) s.back() = 0;
    const std::string m = wait_error(alltoall_async(TensorView::of(v.data(), {4 * n}), s, "a2a.bad.count"));
    CHECK_THAT(m, Catch::Contains("rank 0 gave " + std::to_string(n + 1) + " splits"));
    ok_after("count");
  }
  {
    std::vector<int64_t> s(static_cast<size_t>(n), 4);
    if (me == n - 1) s[0] = -1;
    const std::string m = wait_error(alltoall_async(TensorView::of(v.data(), {4 * n}), s, "a2a.bad.negative"));
    CHECK_THAT(m, Catch::Contains("rank " + std::to_string(n - 1) + " gave a negative split"));
    ok_after("negative");
  }
  {
    // Rows of 2 on rank 0, of 4 elsewhere.
    const int64_t row = me == 0 ? 2 : 4;
    const std::string m =
        wait_error(alltoall_async(TensorView::of(v.data(), {static_cast<int64_t>(v.size()) / row, row}), "a2a.bad.shape"));
    CHECK_THAT(m, Catch::Contains("shape beyond the first dimension [2] on rank 0 but [4] on rank"));
    ok_after("shape");
  }
  {
    std::vector<double> d(static_cast<size_t>(4 * n), 1.0);
    Handle h = me == 0 ? alltoall_async(TensorView::of(d), "a2a.bad.dtype")
                       : alltoall_async(TensorView::of(v), "a2a.bad.dtype");
    CHECK_THAT(wait_error(h), Catch::Contains("dtype float64 on rank 0 but float32 on rank"));
    ok_after("dtype");
  }
  {
    // An even split of 4n + 1 rows on the last rank.
    std::vector<float> w(static_cast<size_t>(4 * n + (me == n - 1 ? 1 : 0)), 1.0f);
    const std::string m = wait_error(alltoall_async(TensorView::of(w), "a2a.bad.even"));
    CHECK_THAT(m, Catch::Contains("rank " + std::to_string(n - 1) + " asked for an even split of " +
                                  std::to_string(4 * n + 1) + " rows"));
    ok_after("even");
  }
  {
    // Local: an empty split list is refused at once on its rank only (so every rank passes one).
    std::vector<int64_t> none;
    CHECK_THAT(wait_error(alltoall_async(TensorView::of(v), none, "a2a.bad.empty")),
               Catch::Contains("splits is empty"));
  }
}

namespace {

// Rows rank `src` sends to rank `dst` in phase `p`: phase 1 changes rank n-1's splits only,
// phase 2 rank 0's only (their totals change too); phase 3 is the even split of phase 0's
// total where it divides.
int64_t phase_split(int p, int src, int dst) {
  const int64_t base = 1 + (src + 2 * dst) % 3;
  if (p == 1 && src == size() - 1) return dst == 0 ? 0 : base + 1;
  if (p == 2 && src == 0) return dst == size() - 1 ? base + 2 : base;
  return base;
}

// One alltoall under `name` with phase p's splits (rows of 2 int32), checked exactly.
void run_phase(const std::string& name, int p, int step) {
  const int n = size(), me = rank();
  std::vector<int64_t> mine;
  int64_t rows = 0;
  for (int d = 0; d < n; ++d) rows += phase_split(p, me, d), mine.push_back(phase_split(p, me, d));
  std::vector<int32_t> in(static_cast<size_t>(rows * 2));
  for (size_t i = 0; i < in.size(); ++i) in[i] = me * 100000 + step * 1000 + static_cast<int32_t>(i);
  Handle h = alltoall_async(TensorView::of(in.data(), {rows, 2}), mine, name);
  wait_ok(h);
  INFO(name << " phase " << p << " step " << step);
  REQUIRE(h.received_splits().size() == static_cast<size_t>(n));
  size_t at = 0, wrong = 0;
  for (int src = 0; src < n; ++src) {
    CHECK(h.received_splits()[src] == phase_split(p, src, me));
    int64_t offset = 0;
    for (int d = 0; d < me; ++d) offset += phase_split(p, src, d);
    for (int64_t i = 0; i < phase_split(p, src, me) * 2; ++i, ++at)
      wrong += h.output().data<int32_t>()[at] != src * 100000 + step * 1000 + static_cast<int32_t>(offset * 2 + i);
  }
  CHECK(h.output().shape == Shape{static_cast<int64_t>(at / 2), 2});
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("alltoall: one name repeated goes through the board; changed and bad splits stay safe", "[alltoall]") {
  // docs/collectives.md, "Alltoall on the fast path": a rank holds a cached alltoall on the
  // board only while its own splits are the ones it last ran with; a rank whose splits
  // changed sends the request to rank 0 and every rank follows it there.
  const bool board = board_in_use();
  const std::string name = "a2a.cached";
  const auto fast = [] { return runtime_stats().fast_collectives; };
  auto before = fast();
  for (int s = 0; s < 5; ++s) run_phase(name, 0, s);
  if (board) CHECK(fast() - before >= 3);  // the first runs through rank 0; a late one may too
  for (int p : {1, 2, 0}) {  // rank n-1's splits change, then rank 0's, then back
    before = fast();
    for (int s = 0; s < 5; ++s) run_phase(name, p, s);
    // The first step goes through rank 0 (4 on the board; a step held past the 1 s deadline
    // on a loaded machine goes through rank 0 too).
    if (board) CHECK(fast() - before >= 2);
  }
  // Splits that do not add up on rank 1 (after caching): an error on every rank.
  const int n = size(), me = rank();
  std::vector<int32_t> v(static_cast<size_t>(4 * n));
  std::vector<int64_t> bad(static_cast<size_t>(n), 4);
  if (me == 1) bad[0] = 3;
  const std::string m = wait_error(alltoall_async(TensorView::of(v), bad, name));
  CHECK_THAT(m, Catch::Contains("alltoall \"a2a.cached\"") && Catch::Contains("rank 1 gave splits") &&
                    Catch::Contains("add up to " + std::to_string(4 * n - 1)));
  // Usable afterwards under the same name: the cache still holds phase 0, so the board again.
  before = fast();
  for (int s = 0; s < 4; ++s) run_phase(name, 0, s);
  if (board) CHECK(fast() - before >= 2);  // 4 expected
  // The even form of the same name is another signature: renegotiated, then exact.
  for (int s = 0; s < 3; ++s) {
    Tensor t = alltoall(TensorView::of(v), name);
    CHECK(t.shape == Shape{4 * n});
  }
}

TEST_CASE("alltoall and reducescatter on the board: random split changes, any order, exact values", "[alltoall]") {
  // Two alltoall names whose splits change on random ranks at random steps (the same draw on
  // every rank), a reducescatter whose first dimension sometimes changes everywhere, and an
  // allreduce, submitted in a different order on every rank with random pauses.
  const bool board = board_in_use();
  const int n = size(), me = rank();
  std::mt19937 shared(4242u);
  std::mt19937 mine(99u + static_cast<unsigned>(me));
  std::vector<std::vector<int64_t>> table[2];  // [name][src][dst]
  for (auto& t : table) t.assign(static_cast<size_t>(n), std::vector<int64_t>(static_cast<size_t>(n), 1));
  int64_t rs_rows = 2 * n + 1;
  const auto before = runtime_stats().fast_collectives;
  for (int step = 0; step < 40; ++step) {
    for (auto& t : table)
      if (shared() % 3 == 0) {
        auto& row = t[shared() % static_cast<unsigned>(n)];
        for (int64_t& v : row) v = static_cast<int64_t>(shared() % 4);
      }
    if (shared() % 5 == 0) rs_rows = 2 * n + 1 + static_cast<int64_t>(shared() % 5);
    std::vector<std::vector<int32_t>> in(2);
    std::vector<Handle> hs(4);
    std::vector<float> rs_in(static_cast<size_t>(rs_rows) * 2), ar(64);
    for (size_t i = 0; i < rs_in.size(); ++i) rs_in[i] = static_cast<float>((me + 1) * (static_cast<int>(i) % 7 + step));
    for (size_t i = 0; i < ar.size(); ++i) ar[i] = static_cast<float>(me + step);
    int order[4] = {0, 1, 2, 3};
    std::shuffle(order, order + 4, mine);
    for (int which : order) {
      if (mine() % 6 == 0) std::this_thread::sleep_for(std::chrono::microseconds(mine() % 800));
      if (which < 2) {
        const std::vector<int64_t>& splits = table[which][static_cast<size_t>(me)];
        int64_t rows = 0;
        for (int64_t v : splits) rows += v;
        in[which].resize(static_cast<size_t>(rows * 2));
        for (size_t i = 0; i < in[which].size(); ++i) in[which][i] = me * 100000 + step * 1000 + static_cast<int32_t>(i);
        hs[which] = alltoall_async(TensorView::of(in[which].data(), {rows, 2}), splits, "a2a.mix." + std::to_string(which));
      } else if (which == 2) {
        hs[2] = reducescatter_async(TensorView::of(rs_in.data(), {rs_rows, 2}), "rs.mix", {ReduceOp::kSum});
      } else {
        hs[3] = allreduce_async(TensorView::of(ar), "ar.mix", {ReduceOp::kSum});
      }
    }
    for (int which = 0; which < 4; ++which) wait_ok(hs[which]);
    INFO("step " << step);
    for (int which = 0; which < 2; ++which) {
      size_t at = 0, wrong = 0;
      for (int src = 0; src < n; ++src) {
        const auto& row = table[which][static_cast<size_t>(src)];
        CHECK(hs[which].received_splits()[src] == row[static_cast<size_t>(me)]);
        int64_t offset = 0;
        for (int d = 0; d < me; ++d) offset += row[static_cast<size_t>(d)];
        for (int64_t i = 0; i < row[static_cast<size_t>(me)] * 2; ++i, ++at)
          wrong += hs[which].output().data<int32_t>()[at] != src * 100000 + step * 1000 + static_cast<int32_t>(offset * 2 + i);
      }
      CHECK(static_cast<int64_t>(at) == hs[which].output().num_elements());
      CHECK(wrong == 0);
    }
    int64_t first = 0;
    const int64_t rows = reducescatter_rows(rs_rows, n, me, &first);
    size_t wrong = 0;
    for (int64_t k = 0; k < rows * 2; ++k) {
      const size_t g = static_cast<size_t>(first * 2 + k);
      float want = 0;
      for (int r = 0; r < n; ++r) want += static_cast<float>((r + 1) * (static_cast<int>(g) % 7 + step));
      wrong += hs[2].output().data<float>()[k] != want;
    }
    CHECK(wrong == 0);
    float sum = 0;
    for (int r = 0; r < n; ++r) sum += static_cast<float>(r + step);
    CHECK(ar[63] == sum);
  }
  if (board) CHECK(runtime_stats().fast_collectives - before >= 40);
}

// Alltoall into an output the caller provides: exact rows (uneven splits, every dtype, the
// output larger than needed with its tail left alone, one output reused across calls), the
// output in allocate_shared memory (where there is any: peers write into it), and the
// output errors taking turns on every rank: the rank at fault fails naming the tensor, its
// peers get exact results, and the runtime is usable afterwards.
#include <algorithm>
#include <cstring>

#include "kolo/memory.h"
#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

// Rows rank `src` sends to rank `dst` in case `seed` (zero for some pairs).
int64_t rows_of(uint64_t seed, int src, int dst, int64_t scale) {
  const uint64_t k = seed * 11 + static_cast<uint64_t>(src) * 5 + static_cast<uint64_t>(dst) * 3;
  return k % 4 == 0 ? 0 : static_cast<int64_t>(1 + k % static_cast<uint64_t>(scale));
}

constexpr double kUntouched = 77;  // what the output's rows beyond the received ones hold

// One alltoall of rows of `row` elements into `out` (count elements of type t, at least the
// rows received plus `spare` rows); checks every element received and that the spare rows
// still hold kUntouched.
void check_into(uint64_t seed, DType t, int64_t scale, int64_t row, void* out, int64_t spare) {
  const int me = rank(), n = size();
  std::vector<int64_t> mine;
  int64_t rows = 0, total = 0;
  for (int d = 0; d < n; ++d) mine.push_back(rows_of(seed, me, d, scale)), rows += mine.back();
  for (int s = 0; s < n; ++s) total += rows_of(seed, s, me, scale);
  Buffer in(t, static_cast<size_t>(rows * row));
  for (size_t i = 0; i < in.count(); ++i) in.put(i, input_value(seed, me, i, t, ReduceOp::kMax));
  const size_t out_count = static_cast<size_t>((total + spare) * row);
  for (size_t i = 0; i < out_count; ++i) set(out, t, i, kUntouched);
  const std::string name = "a2a.into." + std::to_string(seed) + "." + std::string(dtype_name(t));
  INFO(name);
  Handle h = alltoall_async(in.view({rows, row}), TensorView{out, t, {total + spare, row}}, mine, name);
  wait_ok(h);
  CHECK(h.output().bytes.empty());
  const std::vector<int64_t>& got = h.received_splits();
  REQUIRE(got.size() == static_cast<size_t>(n));
  size_t at = 0, wrong = 0;
  for (int src = 0; src < n; ++src) {
    CHECK(got[src] == rows_of(seed, src, me, scale));
    int64_t offset = 0;  // src's block for me starts after its blocks for ranks before me
    for (int d = 0; d < me; ++d) offset += rows_of(seed, src, d, scale);
    for (int64_t i = 0; i < got[src] * row; ++i, ++at)
      wrong += get(out, t, at) != input_value(seed, src, static_cast<size_t>(offset * row + i), t, ReduceOp::kMax);
  }
  for (; at < out_count; ++at) wrong += get(out, t, at) != kUntouched;
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("alltoall into an output: exact rows, every dtype, spare rows left alone, reused", "[alltoall]") {
  for (DType t : all_dtypes()) {
    Buffer out(t, 64 * 64);  // room for any case below
    check_into(1, t, 3, 1, out.bytes.data(), 0);
    check_into(2, t, 5, 3, out.bytes.data(), 2);
  }
  // Blocks of 16-80 KB (the direct path where the pool is on), one output for every call.
  Buffer out(DType::kFloat32, static_cast<size_t>(4 * size() * 5 * 4096));
  for (uint64_t seed = 3; seed < 7; ++seed) check_into(seed, DType::kFloat32, 4, 4096, out.bytes.data(), 1);
  // The blocking form.
  std::vector<int64_t> splits(static_cast<size_t>(size()), 2), received;
  std::vector<int32_t> v(static_cast<size_t>(2 * size())), o(v.size() + 1, -1);
  for (size_t i = 0; i < v.size(); ++i) v[i] = rank() * 100 + static_cast<int32_t>(i);
  alltoall(TensorView::of(v), TensorView::of(o), splits, "a2a.into.blocking", &received);
  CHECK(received == splits);
  for (int src = 0; src < size(); ++src)
    for (int k = 0; k < 2; ++k) CHECK(o[static_cast<size_t>(2 * src + k)] == src * 100 + 2 * rank() + k);
  CHECK(o.back() == -1);
}

TEST_CASE("alltoall into allocate_shared memory: exact rows, peers write into it", "[alltoall]") {
  if (shared_memory_capacity() == 0) {
    SUCCEED("no shared memory arena in this job");
    return;
  }
  const size_t bytes = static_cast<size_t>(4 * size() * 5 * 4096 + 64 * 64) * sizeof(double);
  void* out = allocate_shared(bytes);  // every rank alike
  for (uint64_t seed = 3; seed < 8; ++seed) check_into(seed, DType::kFloat32, 4, 4096, out, 1);  // 16-80 KB blocks
  for (DType t : all_dtypes()) check_into(9, t, 5, 3, out, 2);
  CHECK(release_shared(out));
}

// Each output error on one rank at a time. All but "small" are found at submit, on that rank
// alone; it still takes part in the exchange, so its peers get exact rows (none waits for
// it), and its output is never written.
TEST_CASE("alltoall into an output: errors on the rank at fault, exact results on its peers", "[alltoall][errors]") {
  const int n = size(), me = rank();
  const size_t count = static_cast<size_t>(2 * n * 3);
  // Each rank sends 2 rows of 3 floats to every rank: 2n rows arrive.
  std::vector<float> in(count);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(me * 1000 + static_cast<int>(i));
  const std::vector<float> sent = in;
  const TensorView input = TensorView::of(in.data(), {2 * n, 3});
  auto exact = [&](const float* out) {
    size_t wrong = 0;
    for (int src = 0; src < n; ++src)
      for (int k = 0; k < 6; ++k)
        wrong += out[static_cast<size_t>(src * 6 + k)] != static_cast<float>(src * 1000 + me * 6 + k);
    return wrong == 0;
  };
  struct Case {
    const char* tag;
    const char* says;
  };
  const Case cases[] = {{"small", "has room for"},
                        {"dtype", "has another dtype than input float32"},
                        {"shape", "beyond the first"},
                        {"overlap", "overlaps the input"},
                        {"tail", "overlaps the input"},  // only rows the exchange would not write overlap
                        {"null", "null data pointer"},
                        {"scalar", "is a scalar"}};
  for (const Case& c : cases) {
    const std::string tag = c.tag;
    for (int bad = 0; bad < n; ++bad) {
      const std::string name = "a2a.into.bad." + tag + "." + std::to_string(bad);
      INFO(name << " on rank " << bad);
      std::vector<float> out(count + 6, -1.0f);
      std::vector<int32_t> ints(out.size(), -1);
      std::vector<float> both(2 * count, -1.0f);  // "tail": the output, its second half the input
      std::copy(in.begin(), in.end(), both.begin() + static_cast<std::ptrdiff_t>(count));
      float scalar = -1.0f;
      TensorView i = input, o = TensorView::of(out.data(), {2 * n, 3});
      if (me == bad) {
        if (tag == "small") o.shape = {2 * n - 1, 3};
        if (tag == "dtype") o = TensorView::of(ints.data(), {2 * n, 3});
        if (tag == "shape") o.shape = {n, 6};
        if (tag == "overlap") o = TensorView::of(in.data(), {2 * n, 3});
        if (tag == "tail") {
          i = TensorView::of(both.data() + count, {2 * n, 3});
          o = TensorView::of(both.data(), {4 * n, 3});
        }
        if (tag == "null") o.data = nullptr;
        if (tag == "scalar") o = TensorView::of(&scalar, {});
      }
      Handle h = alltoall_async(i, o, name);
      if (me == bad) {
        const std::string m = wait_error(h, 60);
        CHECK_THAT(m, Catch::Contains("alltoall \"" + name + "\": output") && Catch::Contains(c.says));
        if (tag == "small")
          CHECK_THAT(m, Catch::Contains("room for " + std::to_string(2 * n - 1) + " rows") &&
                            Catch::Contains("add up to " + std::to_string(2 * n)));
        // Nothing written where this rank's output was.
        CHECK(std::all_of(out.begin(), out.end(), [](float v) { return v == -1.0f; }));
        CHECK(std::all_of(ints.begin(), ints.end(), [](int32_t v) { return v == -1; }));
        CHECK(scalar == -1.0f);
        CHECK(in == sent);
        CHECK(std::all_of(both.begin(), both.begin() + static_cast<std::ptrdiff_t>(count),
                          [](float v) { return v == -1.0f; }));
      } else {
        wait_ok(h);
        CHECK(exact(out.data()));
      }
      // Usable afterwards, on every rank, into an output again.
      std::vector<float> again(count, -1.0f);
      alltoall(input, TensorView::of(again.data(), {2 * n, 3}), name + ".after");
      CHECK(exact(again.data()));
    }
  }
  // The same error on every rank: every rank fails, and the blocking form throws.
  CHECK_THAT(wait_error(alltoall_async(input, TensorView{nullptr, DType::kFloat32, {2 * n, 3}}, "a2a.into.null")),
             Catch::Contains("alltoall \"a2a.into.null\": output float32[" + std::to_string(2 * n) + ",3]"));
  CHECK_THROWS_WITH(alltoall(input, TensorView{nullptr, DType::kFloat32, {1, 3}}, "a2a.into.null2"),
                    Catch::Contains("a2a.into.null2"));
  std::vector<float> again(count, -1.0f);
  alltoall(input, TensorView::of(again.data(), {2 * n, 3}), "a2a.into.null.after");
  CHECK(exact(again.data()));
}

// Blocks of 16 KB take the pool's direct path, and from the second call its one-step form
// (each rank reserves its next result at the previous call). Errors and other collectives
// right after a successful call, then more calls: every result exact.
TEST_CASE("alltoall after errors right after a successful one: exact results", "[alltoall][errors]") {
  const int n = size(), me = rank();
  const int64_t row = 4096;  // int32: 16 KB per block
  std::vector<int32_t> in(static_cast<size_t>(n * row));
  auto fill = [&](int call) {
    for (size_t i = 0; i < in.size(); ++i) in[i] = me * 1000000 + call * 10000 + static_cast<int32_t>(i % 9973);
  };
  auto exact = [&](int call, const int32_t* got) {
    size_t wrong = 0;
    for (int src = 0; src < n; ++src)
      for (int64_t j = 0; j < row; ++j)
        wrong += got[src * row + j] !=
                 src * 1000000 + call * 10000 + static_cast<int32_t>(static_cast<size_t>(me * row + j) % 9973);
    return wrong == 0;
  };
  const TensorView input = TensorView::of(in.data(), {n * row});
  Tensor kept;  // the caller keeps the previous result, as a training loop does
  auto call = [&](int k) {
    fill(k);
    kept = alltoall(input, "a2a.after-errors." + std::to_string(k));
    INFO("call " << k);
    REQUIRE(kept.shape == Shape{n * row});
    CHECK(exact(k, kept.data<int32_t>()));
  };
  call(0);
  call(1);
  // Splits that do not add up on rank 0: every rank fails in negotiation.
  std::vector<int64_t> bad(static_cast<size_t>(n), row);
  if (me == 0) bad[0] = row + 1;
  CHECK_THAT(wait_error(alltoall_async(input, bad, "a2a.after-errors.bad")), Catch::Contains("add up to"));
  call(2);
  // An output too small on rank n-1: it fails, its peers get exact rows.
  fill(3);
  std::vector<int32_t> small(static_cast<size_t>(n * row));
  Handle h = alltoall_async(input, TensorView::of(small.data(), {me == n - 1 ? n * row - 1 : n * row}),
                            "a2a.after-errors.small");
  if (me == n - 1) {
    CHECK_THAT(wait_error(h, 60), Catch::Contains("has room for"));
  } else {
    wait_ok(h);
    CHECK(exact(3, small.data()));
  }
  call(4);
  std::vector<float> v(8, 1.0f);
  allreduce(TensorView::of(v), "a2a.after-errors.allreduce", {ReduceOp::kSum});
  CHECK(v[0] == static_cast<float>(n));
  call(5);
  kept = Tensor();  // dropped before the call
  call(6);
  std::vector<int32_t> mine(static_cast<size_t>(n * row));  // into a caller's output, then back
  fill(7);
  alltoall(input, TensorView::of(mine.data(), {n * row}), "a2a.after-errors.into");
  CHECK(exact(7, mine.data()));
  call(8);
  call(9);
}

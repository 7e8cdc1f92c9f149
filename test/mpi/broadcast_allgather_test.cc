// Broadcast from every root and ragged allgather, for every dtype.
#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

TEST_CASE("broadcast: every root, every dtype, several sizes", "[broadcast]") {
  for (int root = 0; root < size(); ++root) {
    for (DType t : all_dtypes()) {
      for (size_t n : {size_t{0}, size_t{1}, size_t{513}, size_t{70000}}) {
        const std::string name = "bcast." + std::to_string(root) + "." + std::string(dtype_name(t)) + "." +
                                 std::to_string(n);
        Buffer b(t, n);
        for (size_t i = 0; i < n; ++i)
          b.put(i, rank() == root ? input_value(7, root, i, t, ReduceOp::kMax) : 0.0);
        wait_ok(broadcast_async(b.view(), root, name));
        size_t wrong = 0;
        for (size_t i = 0; i < n; ++i) wrong += b.at(i) != input_value(7, root, i, t, ReduceOp::kMax);
        INFO(name);
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("allgather: first dimension differs per rank (some ranks contribute nothing)", "[allgather]") {
  auto rows_of = [](int r) { return static_cast<int64_t>((r * 5) % 4); };  // rank 0 gives 0 rows
  for (DType t : all_dtypes()) {
    const std::string name = "gather." + std::string(dtype_name(t));
    const int64_t mine = rows_of(rank());
    Buffer b(t, static_cast<size_t>(mine * 3 * 2));
    for (size_t i = 0; i < b.count(); ++i) b.put(i, input_value(3, rank(), i, t, ReduceOp::kMax));
    Handle h = allgather_async(b.view({mine, 3, 2}), name);
    wait_ok(h);
    const Tensor& out = h.gathered();
    int64_t total = 0;
    for (int r = 0; r < size(); ++r) total += rows_of(r);
    REQUIRE(out.shape == Shape{total, 3, 2});
    REQUIRE(out.dtype == t);
    size_t at = 0, wrong = 0;
    for (int r = 0; r < size(); ++r)
      for (size_t i = 0; i < static_cast<size_t>(rows_of(r) * 6); ++i, ++at)
        wrong += get(out.bytes.data(), t, at) != input_value(3, r, i, t, ReduceOp::kMax);
    INFO(name);
    CHECK(wrong == 0);
  }
}

TEST_CASE("allgather: blocking form returns an owned tensor", "[allgather]") {
  std::vector<int32_t> mine(static_cast<size_t>(rank() + 1), rank());
  Tensor all = allgather(TensorView::of(mine), "gather.blocking");
  REQUIRE(all.shape == Shape{static_cast<int64_t>(size() * (size() + 1) / 2)});
  size_t at = 0;
  for (int r = 0; r < size(); ++r)
    for (int i = 0; i <= r; ++i) CHECK(all.data<int32_t>()[at++] == r);
}

TEST_CASE("barrier completes on every rank", "[broadcast]") {
  for (int i = 0; i < 5; ++i) barrier();
  SUCCEED();
}

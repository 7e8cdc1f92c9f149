// Reducescatter: every dtype x reduce op x first dimension 0 / 1 / odd / large, with and
// without scale factors; rank r checks its rows (Horovod's split: the first dim0 % size ranks
// get one row more) against the exact reduction computed from seed and rank.
#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

void check_reducescatter(uint64_t seed, DType t, ReduceOp op, int64_t dim0, int64_t row, double pre, double post,
                         const std::string& fixed_name = "") {
  const int me = rank(), n = size();
  Buffer in(t, static_cast<size_t>(dim0 * row));
  for (size_t i = 0; i < in.count(); ++i) in.put(i, input_value(seed, me, i, t, op));
  const Buffer original = in;
  const std::string name = !fixed_name.empty() ? fixed_name : "rs." + std::to_string(seed) + "." + std::string(dtype_name(t)) + "." +
                           std::string(reduce_op_name(op)) + "." + std::to_string(dim0) + "x" + std::to_string(row);
  const Shape shape = row == 1 ? Shape{dim0} : Shape{dim0, row};
  Handle h = reducescatter_async(in.view(shape), name, AllreduceOptions{op, pre, post});
  wait_ok(h);
  const Tensor& out = h.output();
  int64_t first = 0;
  const int64_t rows = reducescatter_rows(dim0, n, me, &first);
  INFO(name);
  CHECK(rows == dim0 / n + (me < dim0 % n ? 1 : 0));
  Shape want = shape;
  want[0] = rows;
  REQUIRE(out.shape == want);
  REQUIRE(out.dtype == t);
  size_t wrong = 0;
  for (size_t k = 0; k < static_cast<size_t>(rows * row); ++k) {
    const size_t global = static_cast<size_t>(first * row) + k;
    const double e = expected_allreduce(seed, n, global, t, op, pre, post);
    const double g = get(out.bytes.data(), t, k);
    if (std::abs(g - e) > tolerance(t, e)) {
      if (wrong == 0) UNSCOPED_INFO("element " << global << ": got " << g << ", expected " << e);
      ++wrong;
    }
  }
  CHECK(wrong == 0);
  CHECK(in.bytes == original.bytes);  // the input is left alone
}

}  // namespace

TEST_CASE("reducescatter: every dtype and op, first dimension 0/1/odd", "[reducescatter]") {
  const int64_t odd = 2 * size() + 1;
  for (DType t : all_dtypes())
    for (ReduceOp op : all_reduce_ops())
      for (int64_t dim0 : {int64_t{0}, int64_t{1}, odd}) check_reducescatter(11, t, op, dim0, 3, 1.0, 1.0);
}

TEST_CASE("reducescatter: prescale and postscale", "[reducescatter]") {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt32})
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax})
      check_reducescatter(12, t, op, 5 * size() + 2, 2, 2.0, 0.5);
}

TEST_CASE("reducescatter: large (several shared-memory steps)", "[reducescatter]") {
  check_reducescatter(13, DType::kFloat64, ReduceOp::kSum, 1000003, 1, 1.0, 1.0);
  check_reducescatter(14, DType::kFloat32, ReduceOp::kAverage, 100001, 7, 1.0, 1.0);
}

TEST_CASE("reducescatter: blocking form, default op average", "[reducescatter]") {
  const int n = size();
  std::vector<double> v(static_cast<size_t>(n) * 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(rank() + 1) * static_cast<double>(i);
  Tensor mine = reducescatter(TensorView::of(v.data(), {n, 2}), "rs.blocking");
  REQUIRE(mine.shape == Shape{1, 2});
  const double mean_factor = (n + 1) / 2.0;  // average of 1..n
  for (int k = 0; k < 2; ++k) CHECK(mine.data<double>()[k] == Approx(mean_factor * (2 * rank() + k)));
}

TEST_CASE("reducescatter: mismatches fail on every rank", "[reducescatter][errors]") {
  const int me = rank();
  std::vector<float> v(12, 1.0f);
  auto ok_after = [&](const std::string& tag) {
    Tensor t = reducescatter(TensorView::of(v.data(), {12}), "rs.after." + tag, {ReduceOp::kSum});
    CHECK(t.shape[0] == reducescatter_rows(12, size(), me));
  };
  {
    Handle h = reducescatter_async(TensorView::of(v.data(), {me == 1 ? 6 : 12}), "rs.bad.shape", {ReduceOp::kSum});
    CHECK_THAT(wait_error(h), Catch::Contains("reducescatter \"rs.bad.shape\": shape [12] on rank") &&
                                  Catch::Contains("but [6] on rank 1"));
    ok_after("shape");
  }
  {
    Handle h = reducescatter_async(TensorView::of(v.data(), {12}), "rs.bad.op",
                                   {me == 0 ? ReduceOp::kMax : ReduceOp::kSum});
    CHECK_THAT(wait_error(h), Catch::Contains("reduce op max on rank 0 but sum on rank"));
    ok_after("op");
  }
  {
    float scalar = 1;
    Handle h = reducescatter_async(TensorView::of(&scalar, {}), "rs.bad.scalar");
    CHECK_THAT(wait_error(h), Catch::Contains("needs at least one dimension to scatter along"));
    ok_after("scalar");
  }
}

TEST_CASE("reducescatter: one name repeated goes through the board; a changed shape fails everywhere",
          "[reducescatter]") {
  const bool board = board_in_use();
  const auto fast = [] { return runtime_stats().fast_collectives; };
  const int64_t dim0 = 3 * size() + 1;
  auto before = fast();
  for (uint64_t s = 0; s < 5; ++s) check_reducescatter(20 + s, DType::kFloat32, ReduceOp::kSum, dim0, 3, 1.0, 1.0, "rs.cached");
  if (board) CHECK(fast() - before >= 3);
  // The last rank changes the shape after caching: it goes to rank 0, every rank follows.
  std::vector<float> v(static_cast<size_t>(dim0 * 3), 1.0f);
  const int64_t mine = rank() == size() - 1 ? dim0 + 1 : dim0;
  std::vector<float> w(static_cast<size_t>(mine * 3), 1.0f);
  const std::string m = wait_error(reducescatter_async(TensorView::of(w.data(), {mine, 3}), "rs.cached", {ReduceOp::kSum}));
  CHECK_THAT(m, Catch::Contains("reducescatter \"rs.cached\"") && Catch::Contains("shape"));
  before = fast();
  for (uint64_t s = 0; s < 4; ++s) check_reducescatter(30 + s, DType::kFloat32, ReduceOp::kSum, dim0, 3, 1.0, 1.0, "rs.cached");
  if (board) CHECK(fast() - before >= 2);
  // Another op under the same name is another signature: renegotiated, exact.
  for (uint64_t s = 0; s < 3; ++s) check_reducescatter(40 + s, DType::kFloat32, ReduceOp::kMax, dim0, 3, 1.0, 1.0, "rs.cached");
}

// Grouped allreduce / allgather / reducescatter (one handle, all members negotiated as one
// unit, a bad member fails the whole group on every rank naming it), the out-of-place forms
// and automatic names.
#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

TEST_CASE("grouped allreduce: every member reduced, sizes 0/1/odd/large, every dtype", "[grouped]") {
  for (DType t : all_dtypes()) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kProduct}) {
      const std::vector<size_t> counts = {0, 1, 513, 70001, 7};
      std::vector<Buffer> bufs;
      std::vector<TensorView> views;
      for (size_t m = 0; m < counts.size(); ++m) {
        bufs.emplace_back(t, counts[m]);
        for (size_t i = 0; i < counts[m]; ++i) bufs[m].put(i, input_value(20 + m, rank(), i, t, op));
      }
      for (auto& b : bufs) views.push_back(b.view());
      const std::string name = "grp.ar." + std::string(dtype_name(t)) + "." + std::string(reduce_op_name(op));
      wait_ok(grouped_allreduce_async(views, name, {op}));
      size_t wrong = 0;
      for (size_t m = 0; m < counts.size(); ++m)
        for (size_t i = 0; i < counts[m]; ++i) {
          const double e = expected_allreduce(20 + m, size(), i, t, op, 1.0, 1.0);
          wrong += std::abs(bufs[m].at(i) - e) > tolerance(t, e);
        }
      INFO(name);
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("grouped allgather and reducescatter return one tensor per member", "[grouped]") {
  const int me = rank(), n = size();
  std::vector<Buffer> bufs;
  for (int m = 0; m < 3; ++m) {
    bufs.emplace_back(DType::kInt32, static_cast<size_t>((me + m) * 2));
    for (size_t i = 0; i < bufs.back().count(); ++i) bufs.back().put(i, input_value(30 + m, me, i, DType::kInt32, ReduceOp::kMax));
  }
  std::vector<TensorView> views;
  for (int m = 0; m < 3; ++m) views.push_back(bufs[m].view({me + m, 2}));
  const std::vector<Tensor> gathered = grouped_allgather(views, "grp.ag");
  REQUIRE(gathered.size() == 3);
  for (int m = 0; m < 3; ++m) {
    size_t at = 0, wrong = 0;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < static_cast<size_t>((r + m) * 2); ++i, ++at)
        wrong += get(gathered[m].bytes.data(), DType::kInt32, at) != input_value(30 + m, r, i, DType::kInt32, ReduceOp::kMax);
    CHECK(wrong == 0);
    CHECK(gathered[m].shape[0] == (n * (n - 1)) / 2 + n * m);
  }

  std::vector<Buffer> rs;
  std::vector<TensorView> rviews;
  const std::vector<int64_t> dims = {0, 1, 2 * n + 1, 40000};
  for (size_t m = 0; m < dims.size(); ++m) {
    rs.emplace_back(DType::kFloat32, static_cast<size_t>(dims[m]));
    for (size_t i = 0; i < rs.back().count(); ++i) rs.back().put(i, input_value(40 + m, me, i, DType::kFloat32, ReduceOp::kSum));
  }
  for (size_t m = 0; m < dims.size(); ++m) rviews.push_back(rs[m].view({dims[m]}));
  Handle h = grouped_reducescatter_async(rviews, "grp.rs", {ReduceOp::kSum});
  wait_ok(h);
  const std::vector<Tensor>& parts = h.outputs();
  REQUIRE(parts.size() == dims.size());
  for (size_t m = 0; m < dims.size(); ++m) {
    int64_t first = 0;
    const int64_t rows = reducescatter_rows(dims[m], n, me, &first);
    REQUIRE(parts[m].shape == Shape{rows});
    size_t wrong = 0;
    for (int64_t k = 0; k < rows; ++k)
      wrong += parts[m].data<float>()[k] !=
               expected_allreduce(40 + m, n, static_cast<size_t>(first + k), DType::kFloat32, ReduceOp::kSum, 1, 1);
    CHECK(wrong == 0);
  }
}

TEST_CASE("grouped: a bad member fails every member on every rank, naming it", "[grouped][errors]") {
  const int me = rank();
  std::vector<float> a(8, 1.0f), b(8, 1.0f), c(8, 1.0f);
  {
    // Member 1 has another shape on rank 1.
    Handle h = grouped_allreduce_async(
        {TensorView::of(a.data(), {8}), TensorView::of(b.data(), {me == 1 ? 4 : 8}), TensorView::of(c.data(), {8})},
        "grp.bad.shape", {ReduceOp::kSum});
    const std::string m = wait_error(h);
    CHECK_THAT(m, Catch::Contains("grouped allreduce \"grp.bad.shape\" failed: member \"grp.bad.shape[1]\"") &&
                      Catch::Contains("shape [8] on rank") && Catch::Contains("[4] on rank 1"));
    for (float v : a) CHECK(v == 1.0f);  // no member ran
  }
  {
    // Rank 0 groups three tensors, the others two.
    std::vector<TensorView> views = {TensorView::of(a), TensorView::of(b)};
    if (me == 0) views.push_back(TensorView::of(c));
    const std::string m = wait_error(grouped_allreduce_async(views, "grp.bad.size", {ReduceOp::kSum}));
    CHECK_THAT(m, Catch::Contains("\"grp.bad.size") && Catch::Contains("group size 3 on rank 0 but 2 on rank"));
  }
  {
    // The runtime is usable afterwards (and the names may be used again).
    wait_ok(grouped_allreduce_async({TensorView::of(a), TensorView::of(b)}, "grp.bad.size", {ReduceOp::kSum}));
    CHECK(a[0] == static_cast<float>(size()));
  }
  {
    // A member a rank judges bad alone (null data) fails the group on that rank at once.
    TensorView bad{nullptr, DType::kFloat32, {4}};
    CHECK_THAT(wait_error(grouped_allreduce_async({TensorView::of(a), bad}, "grp.bad.local")),
               Catch::Contains("grp.bad.local[1]") && Catch::Contains("null"));
  }
}

TEST_CASE("out-of-place allreduce and broadcast leave the input alone", "[grouped]") {
  std::vector<double> in(33), out(33, -1.0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = input_value(50, rank(), i, DType::kFloat64, ReduceOp::kSum);
  const std::vector<double> before = in;
  allreduce(TensorView::of(in), TensorView::of(out), "oop.ar", {ReduceOp::kSum});
  CHECK(in == before);
  for (size_t i = 0; i < in.size(); ++i)
    CHECK(out[i] == expected_allreduce(50, size(), i, DType::kFloat64, ReduceOp::kSum, 1, 1));
  std::vector<double> got(33, 0.0);
  broadcast(TensorView::of(in), TensorView::of(got), size() - 1, "oop.bc");
  CHECK(in == before);
  for (size_t i = 0; i < in.size(); ++i)
    CHECK(got[i] == input_value(50, size() - 1, i, DType::kFloat64, ReduceOp::kSum));
  std::vector<double> small(3);
  CHECK_THAT(wait_error(allreduce_async(TensorView::of(in), TensorView::of(small), "oop.bad")),
             Catch::Contains("output float64[3] cannot hold input float64[33]"));
}

TEST_CASE("automatic names agree across ranks, per call site and count", "[grouped]") {
  std::vector<int32_t> v(5);
  for (int step = 0; step < 3; ++step) {
    std::fill(v.begin(), v.end(), rank() + step);
    Handle a = allreduce_async(TensorView::of(v), {ReduceOp::kSum});  // one site, three calls
    wait_ok(a);
    for (int32_t x : v) CHECK(x == size() * (size() - 1) / 2 + size() * step);
  }
  std::vector<int64_t> rows(static_cast<size_t>(size()) * 2, rank());
  Handle t = alltoall_async(TensorView::of(rows));
  wait_ok(t);
  for (int src = 0; src < size(); ++src) CHECK(t.output().data<int64_t>()[2 * src] == src);
  // Two sites on one line differ by column; counts are per site.
  const std::source_location here = std::source_location::current();
  const std::string n1 = auto_name(OpKind::kAllreduce, here), n2 = auto_name(OpKind::kAllreduce, here);
  CHECK(n1 == "kolo.auto.allreduce.grouped_test.cc:" + std::to_string(here.line()) + ":" +
                  std::to_string(here.column()) + ".0");
  CHECK(n2.substr(n2.size() - 2) == ".1");
}

// Bool tensors in every collective. Reductions follow torch.distributed: sum and max are a
// logical OR, product and min a logical AND; average and scale factors are refused when the
// collective is submitted, on the rank that submits it, and the runtime goes on.
#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

// Rank r's element i is bit r of i mod 2^size: over the ranks every pattern occurs, so OR is
// (i mod 2^size) != 0 and AND is (i mod 2^size) == 2^size - 1.
std::vector<bool> pattern(size_t n, int r) {
  std::vector<bool> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = (i % (size_t{1} << size()) >> r) & 1u;
  return v;
}

std::vector<uint8_t> as_bytes(const std::vector<bool>& v) { return {v.begin(), v.end()}; }

bool want(size_t i, ReduceOp op) {
  const size_t all = (size_t{1} << size()) - 1, p = i % (size_t{1} << size());
  return op == ReduceOp::kSum || op == ReduceOp::kMax ? p != 0 : p == all;
}

TensorView bool_view(std::vector<uint8_t>& b, Shape s) { return TensorView{b.data(), DType::kBool, std::move(s)}; }
TensorView bool_view(std::vector<uint8_t>& b) { return bool_view(b, {static_cast<int64_t>(b.size())}); }

}  // namespace

TEST_CASE("bool allreduce: sum and max are OR, product and min are AND", "[allreduce]") {
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<Handle> handles;
  std::vector<std::pair<ReduceOp, size_t>> cases;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kProduct, ReduceOp::kMin})
    for (size_t n : {size_t{0}, size_t{1}, size_t{17}, size_t{1001}, size_t{150001}}) cases.push_back({op, n});
  bufs.reserve(cases.size());
  for (auto [op, n] : cases) {
    bufs.push_back(as_bytes(pattern(n, rank())));
    handles.push_back(allreduce_async(bool_view(bufs.back()),
                                      "bool." + std::string(reduce_op_name(op)) + "." + std::to_string(n), {op}));
  }
  for (size_t c = 0; c < cases.size(); ++c) {
    wait_ok(handles[c]);
    size_t wrong = 0;
    for (size_t i = 0; i < bufs[c].size(); ++i) wrong += bufs[c][i] != static_cast<uint8_t>(want(i, cases[c].first));
    INFO(reduce_op_name(cases[c].first) << " of " << cases[c].second << " bools");
    CHECK(wrong == 0);
  }
}

TEST_CASE("bool allreduce: average and scale factors are refused at submission", "[allreduce][errors]") {
  std::vector<uint8_t> b = as_bytes(pattern(8, rank()));
  CHECK_THROWS_WITH(allreduce(bool_view(b), "bool.avg", {ReduceOp::kAverage}),
                    Catch::Contains("bool.avg") && Catch::Contains("average of bool tensors is not defined"));
  CHECK_THROWS_WITH(allreduce(bool_view(b), "bool.scaled", {ReduceOp::kSum, 2.0, 1.0}),
                    Catch::Contains("bool tensors cannot be scaled"));
  CHECK_THROWS_WITH(reducescatter(bool_view(b), "bool.rs.avg", {ReduceOp::kAverage}),
                    Catch::Contains("average of bool tensors"));
  // Nothing was queued: the next collective runs on every rank.
  allreduce(bool_view(b), "bool.after", {ReduceOp::kMax});
  for (size_t i = 0; i < b.size(); ++i) CHECK(b[i] == static_cast<uint8_t>(want(i, ReduceOp::kMax)));
}

TEST_CASE("bool broadcast and allgather move the bytes unchanged", "[broadcast]") {
  for (int root = 0; root < size(); ++root) {
    std::vector<uint8_t> b = as_bytes(pattern(1001, root == rank() ? root : (root + 1) % size()));
    broadcast(bool_view(b), root, "bool.bcast." + std::to_string(root));
    CHECK(b == as_bytes(pattern(1001, root)));
  }
  std::vector<uint8_t> mine = as_bytes(pattern(static_cast<size_t>(rank()) + 3, rank()));
  Tensor all = allgather(bool_view(mine), "bool.gather");
  REQUIRE(all.dtype == DType::kBool);
  std::vector<uint8_t> expect;
  for (int r = 0; r < size(); ++r) {
    auto p = as_bytes(pattern(static_cast<size_t>(r) + 3, r));
    expect.insert(expect.end(), p.begin(), p.end());
  }
  REQUIRE(all.bytes.size() == expect.size());
  CHECK(std::equal(expect.begin(), expect.end(), reinterpret_cast<const uint8_t*>(all.bytes.data())));
}

TEST_CASE("bool reducescatter ORs each rank's rows; alltoall moves bools", "[reducescatter]") {
  const size_t rows = static_cast<size_t>(2 * size() + 1), cols = 5;
  std::vector<uint8_t> in = as_bytes(pattern(rows * cols, rank()));
  Tensor out = reducescatter(bool_view(in, {static_cast<int64_t>(rows), static_cast<int64_t>(cols)}), "bool.rs",
                             {ReduceOp::kSum});
  int64_t first = 0;
  const int64_t mine = reducescatter_rows(static_cast<int64_t>(rows), size(), rank(), &first);
  REQUIRE(out.dtype == DType::kBool);
  REQUIRE(out.bytes.size() == static_cast<size_t>(mine) * cols);
  const auto* got = reinterpret_cast<const uint8_t*>(out.bytes.data());
  for (size_t k = 0; k < out.bytes.size(); ++k)
    CHECK(got[k] == static_cast<uint8_t>(want(static_cast<size_t>(first) * cols + k, ReduceOp::kSum)));

  // Alltoall, even split of 2 rows per rank: rank r's rows are all (r + destination) odd.
  std::vector<uint8_t> send(static_cast<size_t>(2 * size()));
  for (int d = 0; d < size(); ++d) send[2 * d] = send[2 * d + 1] = (rank() + d) & 1;
  Tensor recv = alltoall(bool_view(send), "bool.a2a");
  REQUIRE(recv.bytes.size() == send.size());
  const auto* r = reinterpret_cast<const uint8_t*>(recv.bytes.data());
  for (int s = 0; s < size(); ++s) CHECK(r[2 * s] == static_cast<uint8_t>((s + rank()) & 1));
}

// Randomised submission sequences: the same set of collectives (same seed on all ranks)
// submitted in a different order on every rank (seed + rank), mixed kinds (allreduce,
// broadcast, allgather, alltoall, reducescatter, grouped allreduce), dtypes and sizes.
#include <algorithm>
#include <memory>
#include <random>

#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

struct Op {
  OpKind kind;
  DType dtype;
  ReduceOp reduce;
  size_t count;
  int root;
  std::string name;
};

// Kinds drawn: the five collectives, and 5 = a grouped allreduce of three tensors.
constexpr int kGrouped = 5;

// Alltoall: rows op k sends from rank src to rank dst (zero for some pairs).
int64_t a2a_rows(size_t k, size_t count, int src, int dst) {
  return static_cast<int64_t>((k + static_cast<size_t>(src) * 3 + static_cast<size_t>(dst) * 5) % 4 * (1 + count % 50));
}

}  // namespace

TEST_CASE("random sequences of mixed collectives complete with exact results", "[random]") {
  for (uint64_t seed : {101u, 202u, 303u, 404u}) {
    std::mt19937_64 shared(seed);  // identical on every rank
    std::vector<Op> ops;
    const int n = 120;
    for (int i = 0; i < n; ++i) {
      Op o;
      const int drawn = static_cast<int>(shared() % 6);
      o.kind = drawn == kGrouped ? OpKind::kAllreduce : static_cast<OpKind>(drawn);
      o.root = drawn == kGrouped ? -1 : 0;  // marks the grouped ones (root is drawn below otherwise)
      o.dtype = all_dtypes()[shared() % all_dtypes().size()];
      o.reduce = all_reduce_ops()[shared() % all_reduce_ops().size()];
      o.count = static_cast<size_t>(shared() % 4 == 0 ? shared() % 40000 : shared() % 300);
      const int root = static_cast<int>(shared() % static_cast<uint64_t>(size()));
      if (o.root == 0) o.root = root;
      o.name = "rand." + std::to_string(seed) + "." + std::to_string(i);
      ops.push_back(o);
    }
    std::vector<size_t> order(ops.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::mt19937_64 mine(seed + static_cast<uint64_t>(rank()) * 7777);
    std::shuffle(order.begin(), order.end(), mine);

    std::vector<std::unique_ptr<Buffer>> bufs(ops.size());
    std::vector<std::vector<std::unique_ptr<Buffer>>> members(ops.size());  // grouped: the other two
    std::vector<Handle> handles(ops.size());
    std::vector<int64_t> splits;
    for (size_t k : order) {
      const Op& o = ops[k];
      // Allgather: rank r contributes count + r elements. Alltoall: a2a_rows to each rank.
      size_t count = o.kind == OpKind::kAllgather ? o.count + static_cast<size_t>(rank()) : o.count;
      if (o.kind == OpKind::kAlltoall) {
        splits.clear();
        count = 0;
        for (int d = 0; d < size(); ++d) {
          splits.push_back(a2a_rows(k, o.count, rank(), d));
          count += static_cast<size_t>(splits.back());
        }
      }
      bufs[k] = std::make_unique<Buffer>(o.dtype, count);
      for (size_t i = 0; i < count; ++i) bufs[k]->put(i, input_value(seed + k, rank(), i, o.dtype, o.reduce));
      if (o.root < 0) {
        for (size_t m = 1; m <= 2; ++m) {
          members[k].push_back(std::make_unique<Buffer>(o.dtype, o.count / (m + 1) + m));
          Buffer& b = *members[k].back();
          for (size_t i = 0; i < b.count(); ++i) b.put(i, input_value(seed + k + 1000 * m, rank(), i, o.dtype, o.reduce));
        }
        handles[k] = grouped_allreduce_async({bufs[k]->view(), members[k][0]->view(), members[k][1]->view()}, o.name,
                                             {o.reduce});
        continue;
      }
      switch (o.kind) {
        case OpKind::kAllreduce: handles[k] = allreduce_async(bufs[k]->view(), o.name, {o.reduce}); break;
        case OpKind::kBroadcast: handles[k] = broadcast_async(bufs[k]->view(), o.root, o.name); break;
        case OpKind::kAllgather: handles[k] = allgather_async(bufs[k]->view(), o.name); break;
        case OpKind::kAlltoall: handles[k] = alltoall_async(bufs[k]->view(), splits, o.name); break;
        case OpKind::kReducescatter: handles[k] = reducescatter_async(bufs[k]->view(), o.name, {o.reduce}); break;
      }
    }
    for (size_t k = 0; k < ops.size(); ++k) {
      const Op& o = ops[k];
      INFO(o.name << " " << op_kind_name(o.kind) << " " << dtype_name(o.dtype) << " n=" << o.count);
      wait_ok(handles[k]);
      size_t wrong = 0;
      if (o.kind == OpKind::kAllreduce) {
        for (size_t i = 0; i < o.count; ++i) {
          double want = expected_allreduce(seed + k, size(), i, o.dtype, o.reduce, 1.0, 1.0);
          wrong += std::abs(bufs[k]->at(i) - want) > tolerance(o.dtype, want);
        }
        for (size_t m = 1; m <= members[k].size(); ++m)
          for (size_t i = 0; i < members[k][m - 1]->count(); ++i) {
            double want = expected_allreduce(seed + k + 1000 * m, size(), i, o.dtype, o.reduce, 1.0, 1.0);
            wrong += std::abs(members[k][m - 1]->at(i) - want) > tolerance(o.dtype, want);
          }
      } else if (o.kind == OpKind::kAlltoall) {
        const Tensor& out = handles[k].output();
        size_t at = 0;
        for (int src = 0; src < size(); ++src) {
          int64_t offset = 0;
          for (int d = 0; d < rank(); ++d) offset += a2a_rows(k, o.count, src, d);
          for (int64_t i = 0; i < a2a_rows(k, o.count, src, rank()); ++i, ++at)
            wrong += get(out.bytes.data(), o.dtype, at) !=
                     input_value(seed + k, src, static_cast<size_t>(offset + i), o.dtype, o.reduce);
        }
        CHECK(at == static_cast<size_t>(out.num_elements()));
      } else if (o.kind == OpKind::kReducescatter) {
        const Tensor& out = handles[k].output();
        int64_t first = 0;
        const int64_t rows = reducescatter_rows(static_cast<int64_t>(o.count), size(), rank(), &first);
        REQUIRE(out.num_elements() == rows);
        for (int64_t i = 0; i < rows; ++i) {
          double want = expected_allreduce(seed + k, size(), static_cast<size_t>(first + i), o.dtype, o.reduce, 1.0, 1.0);
          wrong += std::abs(get(out.bytes.data(), o.dtype, static_cast<size_t>(i)) - want) > tolerance(o.dtype, want);
        }
      } else if (o.kind == OpKind::kBroadcast) {
        for (size_t i = 0; i < o.count; ++i)
          wrong += bufs[k]->at(i) != input_value(seed + k, o.root, i, o.dtype, o.reduce);
      } else {
        const Tensor& out = handles[k].gathered();
        size_t at = 0;
        for (int r = 0; r < size(); ++r)
          for (size_t i = 0; i < o.count + static_cast<size_t>(r); ++i, ++at)
            wrong += get(out.bytes.data(), o.dtype, at) != input_value(seed + k, r, i, o.dtype, o.reduce);
        CHECK(at == static_cast<size_t>(out.num_elements()));
      }
      CHECK(wrong == 0);
    }
  }
}

// Randomised submission sequences: the same set of collectives (same seed on all ranks)
// submitted in a different order on every rank (seed + rank), mixed kinds, dtypes and sizes.
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

}  // namespace

TEST_CASE("random sequences of mixed collectives complete with exact results", "[random]") {
  for (uint64_t seed : {101u, 202u, 303u, 404u}) {
    std::mt19937_64 shared(seed);  // identical on every rank
    std::vector<Op> ops;
    const int n = 120;
    for (int i = 0; i < n; ++i) {
      Op o;
      o.kind = static_cast<OpKind>(shared() % 3);
      o.dtype = all_dtypes()[shared() % all_dtypes().size()];
      o.reduce = all_reduce_ops()[shared() % all_reduce_ops().size()];
      o.count = static_cast<size_t>(shared() % 4 == 0 ? shared() % 40000 : shared() % 300);
      o.root = static_cast<int>(shared() % static_cast<uint64_t>(size()));
      o.name = "rand." + std::to_string(seed) + "." + std::to_string(i);
      ops.push_back(o);
    }
    std::vector<size_t> order(ops.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::mt19937_64 mine(seed + static_cast<uint64_t>(rank()) * 7777);
    std::shuffle(order.begin(), order.end(), mine);

    std::vector<std::unique_ptr<Buffer>> bufs(ops.size());
    std::vector<Handle> handles(ops.size());
    for (size_t k : order) {
      const Op& o = ops[k];
      // Allgather: rank r contributes count + r elements.
      const size_t count = o.kind == OpKind::kAllgather ? o.count + static_cast<size_t>(rank()) : o.count;
      bufs[k] = std::make_unique<Buffer>(o.dtype, count);
      for (size_t i = 0; i < count; ++i) bufs[k]->put(i, input_value(seed + k, rank(), i, o.dtype, o.reduce));
      switch (o.kind) {
        case OpKind::kAllreduce: handles[k] = allreduce_async(bufs[k]->view(), o.name, {o.reduce}); break;
        case OpKind::kBroadcast: handles[k] = broadcast_async(bufs[k]->view(), o.root, o.name); break;
        case OpKind::kAllgather: handles[k] = allgather_async(bufs[k]->view(), o.name); break;
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

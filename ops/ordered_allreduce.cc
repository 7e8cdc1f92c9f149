// The rank-ordered allreduce: ops/ordered_allreduce.h.
#include "ops/ordered_allreduce.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu_reduce.h"
#include "ops/mpi_util.h"

namespace kolo::ops {

bool order_matters(DType t, ReduceOp op) {
  const bool floating =
      t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16;
  return floating && (op == ReduceOp::kSum || op == ReduceOp::kAverage || op == ReduceOp::kProduct);
}

namespace {

// Segment j of `count` elements over `n` ranks: [count * j / n, count * (j + 1) / n).
size_t seg_begin(size_t count, int n, int j) { return count * static_cast<size_t>(j) / static_cast<size_t>(n); }

// out[0, len) = src(0) op src(1) op ... op src(n-1), folded from the left, a block at a time
// (the block stays in L1 while every source is added to it). `src(i)` may be `out` itself
// (the caller's own segment): each block is read in full before it is written.
template <typename Src>
void fold_in_rank_order(std::byte* out, size_t len, int n, size_t esize, DType t, ReduceOp op, Src src) {
  constexpr size_t kBlockBytes = 16384;
  alignas(64) std::byte acc[kBlockBytes];
  const size_t block = kBlockBytes / esize;
  for (size_t at = 0; at < len; at += block) {
    const size_t m = std::min(block, len - at);
    reduce_pair(acc, src(0) + at * esize, src(1) + at * esize, m, t, op);
    for (int i = 2; i < n; ++i) reduce_into(acc, src(i) + at * esize, m, t, op);
    std::memcpy(out + at * esize, acc, m * esize);
  }
}

}  // namespace

Status ordered_allreduce(MPI_Comm comm, void* buf, size_t count, DType t, ReduceOp op, double postscale,
                         Liveness* liveness, OrderedScratch* x) {
  int n = 1, me = 0;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &me);
  const size_t esize = dtype_size(t);
  auto* base = static_cast<std::byte*>(buf);
  const size_t mine_at = seg_begin(count, n, me), mine = seg_begin(count, n, me + 1) - mine_at;
  if (n > 1 && count > 0) {
    // Reduce-scatter: segment j of every rank goes to rank j (raw, unreduced).
    const size_t most = (count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
    if (x->recv.size() < most * static_cast<size_t>(n) * esize) {
      x->recv.resize(most * static_cast<size_t>(n) * esize);
      mpi_buffer_for_tsan(x->recv.data(), x->recv.size());
    }
    const auto un = static_cast<size_t>(n);
    x->send_counts.assign(un, 0), x->send_displs.assign(un, 0), x->recv_counts.assign(un, 0), x->recv_displs.assign(un, 0);
    for (int j = 0; j < n; ++j) {
      const auto u = static_cast<size_t>(j);
      x->send_displs[u] = static_cast<int>(seg_begin(count, n, j));
      x->recv_displs[u] = static_cast<int>(u * most);
      if (j == me) continue;  // its own segment is read in place
      x->send_counts[u] = static_cast<int>(seg_begin(count, n, j + 1) - seg_begin(count, n, j));
      x->recv_counts[u] = static_cast<int>(mine);
    }
    const MPI_Datatype type = mpi_dtype(t);
    MPI_Request req = MPI_REQUEST_NULL;
    KOLO_RETURN_IF_ERROR(mpi_status(MPI_Ialltoallv(buf, x->send_counts.data(), x->send_displs.data(), type,
                                                   x->recv.data(), x->recv_counts.data(), x->recv_displs.data(), type,
                                                   comm, &req),
                                    "MPI_Ialltoallv"));
    KOLO_RETURN_IF_ERROR(wait_request(&req, "MPI_Ialltoallv", liveness));
    std::byte* own = base + mine_at * esize;
    fold_in_rank_order(own, mine, n, esize, t, op, [&](int i) {
      return i == me ? own : x->recv.data() + static_cast<size_t>(i) * most * esize;
    });
    apply_postscale(own, mine, t, op, n, postscale);
    // Allgather: every rank's finished segment to every rank.
    for (int j = 0; j < n; ++j) {
      const auto u = static_cast<size_t>(j);
      x->recv_counts[u] = static_cast<int>(seg_begin(count, n, j + 1) - seg_begin(count, n, j));
      x->recv_displs[u] = static_cast<int>(seg_begin(count, n, j));
    }
    KOLO_RETURN_IF_ERROR(mpi_status(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, x->recv_counts.data(),
                                                    x->recv_displs.data(), type, comm, &req),
                                    "MPI_Iallgatherv"));
    return wait_request(&req, "MPI_Iallgatherv", liveness);
  }
  apply_postscale(buf, count, t, op, n, postscale);
  return Status::ok();
}

}  // namespace kolo::ops

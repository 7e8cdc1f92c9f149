// ops/ordered_allreduce.h — an allreduce over MPI whose floating-point result is the
// rank-order left fold, ((x0 + x1) + x2) + ... + x(n-1), for every element, whatever the
// buffer's size, chunking or the fusion that produced it: the order the shared-memory engine
// uses on one host (docs/shm.md, "Determinism"). KOLO_DETERMINISTIC=1 routes float sums,
// averages and products of the MPI executor, and of every executor across hosts, here, so a
// sum has the same bits for a given rank count whatever the executor or host layout
// (docs/runtime.md, "One order for float sums").
//
// How: a reduce-scatter in which rank j owns segment j of the buffer; every rank sends its
// raw (prescaled) segment j to rank j (one MPI_Ialltoallv: the same bytes as a ring's
// reduce-scatter), rank j folds the n contributions in rank order — its own read in place —
// and post-scales its segment, then an MPI_Iallgatherv spreads the finished segments. Every
// element is reduced by exactly one rank, in one order, so all ranks hold the same bits.
// Both calls are nonblocking and polled (ops::wait_request): a dead peer fails the
// collective instead of hanging it.
//
// Thread safety: the caller's thread (the coordinator's); OrderedScratch is per caller.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "core/liveness.h"
#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo::ops {

// True where the order of combining changes the bits: floating types under sum, average or
// product (min, max and integer results do not depend on it).
bool order_matters(DType t, ReduceOp op);

// Receive buffers and counts, reused across calls (grown, never shrunk).
struct OrderedScratch {
  std::vector<std::byte> recv;
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
};

// In place over `comm`: buf[i] = fold of every rank's buf[i] in rank order, then the post
// scale of `op` over the communicator's size and `postscale` (ops::apply_postscale; pass
// 1.0 and ReduceOp::kSum to leave it to the caller). `t` is kFloat32 or kFloat64 (16-bit
// floats are widened by the caller); `count` fits in an int.
Status ordered_allreduce(MPI_Comm comm, void* buf, size_t count, DType t, ReduceOp op, double postscale,
                         Liveness* liveness, OrderedScratch* scratch);

}  // namespace kolo::ops

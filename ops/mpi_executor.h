// ops/mpi_executor.h — runs CPU collectives with MPI on kolo's data communicator.
//
// Allreduce of one tensor runs in place on the user's memory; several fused tensors are
// packed into a fusion buffer (applying the prescale while copying), reduced, and unpacked.
// Either way the reduction proceeds in pieces of KOLO_CPU_CHUNK_BYTES so each piece is
// scaled while it is still in cache, and MPI's large-message slowdown on one host (buffers
// that fall out of the L3 cache) is avoided. fp16/bf16 are widened to float32 (times the
// prescale), allreduced as floats and rounded back once after the post-scale
// (kernels/cpu_reduce.h), never rounded to 16 bits between ranks. Every MPI call is nonblocking and
// polled (ops::wait_request), so that no wait on a peer is unbounded. With `ordered`
// (KOLO_DETERMINISTIC=1) float sums, averages and products take the rank-ordered allreduce
// (ops/ordered_allreduce.h) instead of MPI's own: the bits of shared memory's rank-order fold.
//
// Thread safety: coordinator thread only. Owns its fusion buffer.
#pragma once

#include <mpi.h>

#include <span>
#include <vector>

#include "core/executor.h"
#include "core/liveness.h"
#include "ops/ordered_allreduce.h"

namespace kolo::ops {

class MpiExecutor final : public Executor {
 public:
  // `liveness` (borrowed, may be null): consulted while every MPI request is polled, so a
  // dead peer fails the collective instead of hanging it (core/liveness.h).
  // `ordered`: float sums in rank order (above); every rank of `data_comm` must pass the same.
  MpiExecutor(MPI_Comm data_comm, size_t chunk_bytes, Liveness* liveness = nullptr, bool ordered = false);
  const char* name() const override { return "mpi"; }
  bool accepts(const Response& r) const override { return r.device.is_cpu(); }
  Status execute(const Response& r, std::vector<TensorEntry>& entries) override;
  void set_cpu_chunk_bytes(size_t bytes) override { chunk_bytes_ = bytes; }
  size_t chunk_bytes() const { return chunk_bytes_; }
  bool ordered() const { return ordered_; }

  // In-place chunked allreduce of `count` elements at `buf` (shared with other executors'
  // tests and the benchmarks). fp16/bf16 in float32, as above.
  Status allreduce_buffer(void* buf, size_t count, DType t, ReduceOp op, double prescale, double postscale);

 private:
  Status allreduce(const Response& r, std::vector<TensorEntry>& entries);
  Status broadcast(const Response& r, std::vector<TensorEntry>& entries);
  Status allgather(const Response& r, std::vector<TensorEntry>& entries);
  Status alltoall(const Response& r, std::vector<TensorEntry>& entries);
  Status reducescatter(const Response& r, std::vector<TensorEntry>& entries);
  struct Span {
    void* data;
    size_t count;
  };
  Status allreduce_half(std::span<const Span> tensors, DType t, ReduceOp op, double prescale, double postscale);
  // One piece of float32 scratch (16-bit floats widened), summed without the post scale.
  Status allreduce_wide(size_t m, ReduceOp op);

  MPI_Comm comm_;
  Liveness* liveness_;
  int size_ = 1;
  int rank_ = 0;
  std::vector<std::byte> scaled_;  // reducescatter's prescaled input
  size_t chunk_bytes_;
  std::vector<std::byte> fusion_;
  std::vector<float> wide_;  // fp16/bf16: one chunk in float32
  std::vector<Span> spans_;
  bool ordered_ = false;  // KOLO_DETERMINISTIC
  OrderedScratch order_scratch_;
};

}  // namespace kolo::ops

// ops/gpu/hierarchical.h — allreduce of a device buffer in two levels, for jobs whose
// hosts are joined by a slower network than their GPUs (KOLO_HIERARCHICAL_ALLREDUCE=1):
//
//   1. NCCL reduce-scatter among the ranks of this host: local rank l ends up with the
//      host's sum of shard l (the buffer is cut into local_size equal shards; a count that
//      does not divide goes through a padded device copy);
//   2. MPI_Allreduce of that shard across hosts, between the ranks with the same local
//      rank (kolo's cross communicator), through pinned host memory;
//   3. NCCL all-gather among the ranks of this host: every rank gets every shard.
// Only 1/local_size of the buffer crosses the network per rank, and the host-local steps
// run at NVLink/PCIe speed. Average, prescale and postscale are the caller's (the NCCL
// executor's kernels around this), so numerics follow the flat path's rules.
// REQUIRES: every host runs the same number of ranks (the cross communicator pairs shard
// l of every host); ensure_comm() fails on every rank otherwise.
//
// The host-local NCCL communicator is created lazily, on the coordinator thread, at the
// first hierarchical allreduce: local rank 0 makes the id, MPI_Bcast on the local
// communicator shares it; success is agreed on the data communicator so that one rank's
// failure fails the collective on every rank instead of hanging.
//
// Ownership: owns the local NCCL communicator and its buffers; borrows the MPI
// communicators. Thread safety: the coordinator thread only (as NcclExecutor).
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include "kolo/types.h"
#include "ops/gpu/buffers.h"

namespace kolo::ops::gpu {

class HierarchicalAllreduce {
 public:
  HierarchicalAllreduce(MPI_Comm data_comm, MPI_Comm local_comm, MPI_Comm cross_comm);
  ~HierarchicalAllreduce();
  HierarchicalAllreduce(const HierarchicalAllreduce&) = delete;
  HierarchicalAllreduce& operator=(const HierarchicalAllreduce&) = delete;

  // Creates the host-local communicator on `device` if there is none (collective on every
  // rank of the job, see the file comment).
  Status ensure_comm(int device);
  // Reduces `count` elements of `buf` (on the current device) with `op` over the whole job,
  // in place, ordered on `stream`. Kinds: Sum/Average (as Sum), Min, Max, Product.
  // Returns after the work is enqueued, except that step 2 waits for step 1 on the host
  // (bounded by kGpuPeerTimeout, ops/gpu/event_wait.h: a stuck peer is an error, not a hang).
  Status allreduce(void* buf, size_t count, DType t, ReduceOp op, cudaStream_t stream);

  // Aborts the host-local communicator (after a failure; peers cannot be re-synchronized).
  // comm() is null afterwards.
  void abort();
  // The host-local communicator (null until ensure_comm succeeded).
  ncclComm_t comm() const { return comm_; }
  int local_size() const { return local_size_; }
  int cross_size() const { return cross_size_; }

 private:
  MPI_Comm data_comm_, local_comm_, cross_comm_;  // borrowed, constant
  int local_rank_ = 0, local_size_ = 1, cross_size_ = 1;
  ncclComm_t comm_ = nullptr;
  DeviceBuffer padded_;  // buffer rounded up to local_size shards, when it does not divide
  DeviceBuffer shard_;   // this rank's shard
  PinnedBuffer host_;    // the shard, for MPI across hosts
  cudaEvent_t staged_ = nullptr;  // recorded after the shard's copy to host_
};

}  // namespace kolo::ops::gpu

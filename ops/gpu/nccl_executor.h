// ops/gpu/nccl_executor.h — runs collectives on GPU tensors with NCCL.
//
// Communicator: one per process set (today: the world), created lazily by the coordinator
// thread when the first GPU collective executes, on the device of this rank's tensors.
// Rank 0 makes the ncclUniqueId and broadcasts it with MPI on kolo's data communicator;
// every rank reaches that point at the same response, so the MPI calls match. A rank's GPU
// tensors must all live on that one device (a tensor on another GPU fails with a message
// saying so). Setup failures are agreed over MPI, so they fail the collective everywhere.
//
// Execution, on a dedicated non-blocking stream of that device:
//   1. wait (cudaStreamWaitEvent) for every input's ready_event;
//   2. allreduce: one tensor is reduced in place; several are packed into a device fusion
//      buffer by ONE batched-copy kernel (slots aligned to 16 bytes so the copy moves 16-byte
//      words), prescaled, reduced with ncclAllReduce (Average = ncclSum + a postscale kernel,
//      matching the CPU path's numerics, integers included), postscaled, unpacked by one
//      kernel; broadcast: ncclBroadcast per tensor in one NCCL group; allgather with ragged
//      first dimensions: one ncclBroadcast per rank into its slot of a device buffer, in one
//      group (no padding to the largest rank), then copied to the handle's host Tensor
//      through a pinned buffer (after the bounded wait of step 3);
//   3. record an event and wait for it, polling ncclCommGetAsyncError (an asynchronous NCCL
//      error, a timeout, or a CUDA/NCCL call failing in steps 1-3 aborts the communicators
//      and fails this and every later GPU collective).
// Completion semantics: execute() returns only after the stream has finished, so when the
// handle completes the result is visible to the host and to every stream, with no further
// synchronization by the caller.
//
// Ownership: owns the communicator, stream, event and buffers; borrows the MPI communicator.
// Thread safety: constructed on the thread that runs kolo::init (it makes no CUDA call and
// only local MPI queries); everything else runs on the coordinator thread only.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <memory>
#include <vector>

#include "core/executor.h"
#include "ops/gpu/buffers.h"
#include "ops/gpu/hierarchical.h"
#include "ops/gpu/kernels.h"

namespace kolo::ops::gpu {

class NcclExecutor final : public Executor {
 public:
  explicit NcclExecutor(MPI_Comm data_comm);
  ~NcclExecutor() override;
  NcclExecutor(const NcclExecutor&) = delete;
  NcclExecutor& operator=(const NcclExecutor&) = delete;

  const char* name() const override { return "nccl"; }
  // Only created when the GPU plan chose NCCL (ops/gpu/gpu_plan.h), so: every GPU response.
  bool accepts(const Response& r) const override { return !r.device.is_cpu(); }
  Status execute(const Response& r, std::vector<TensorEntry>& entries) override;

  // Building blocks on device memory of `device`, each returning after its work finished.
  // REQUIRES: called in the same order on every rank (they are collectives).
  Status allreduce_buffer(int device, void* buf, size_t count, DType t, ReduceOp op, double prescale,
                          double postscale);
  // recv (recv_count elements) = this rank's share of the reduction of send (size * recv_count).
  Status reducescatter_buffer(int device, const void* send, void* recv, size_t recv_count, DType t, ReduceOp op);

  // From now on allreduce goes through HierarchicalAllreduce (ops/gpu/hierarchical.h) on
  // these communicators (borrowed; they outlive the executor), and needs no world NCCL
  // communicator (broadcast and allgather still create one). Call before the first execute.
  void enable_hierarchical(MPI_Comm local_comm, MPI_Comm cross_comm);
  // Creates the communicator on `device` if there is none yet (collective, see above).
  Status ensure_comm(int device);
  // For benchmarks that compare with raw NCCL on the same communicator and stream.
  ncclComm_t comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }
  // Waits until everything enqueued on the stream has finished (see the file comment).
  Status finish();

 private:
  Status setup_local(int device, ncclUniqueId* id);
  // The stream and event on `device`, which must be the rank's one device.
  Status ensure_stream(int device);
  Status ensure_hierarchical(int device);
  Status prepare(const Response& r, const std::vector<TensorEntry>& entries);
  Status allreduce(const Response& r, std::vector<TensorEntry>& entries);
  Status allreduce_fused(const Response& r, std::vector<TensorEntry>& entries);
  Status broadcast(const Response& r, std::vector<TensorEntry>& entries);
  Status allgather(const Response& r, std::vector<TensorEntry>& entries);
  Status alltoall(const Response& r, std::vector<TensorEntry>& entries);
  Status reducescatter(const Response& r, std::vector<TensorEntry>& entries);
  // Copies `bytes` of device scratch gather_ into the handle's host Tensor (through pinned
  // memory and the bounded wait, as allgather does).
  Status to_host(Tensor& out);
  Status reduce_on_stream(void* buf, size_t count, DType t, ReduceOp op, double prescale, double postscale);
  // Copies `descs` to descs_dev_ (through pinned descs_host_), ordered on the stream.
  Status upload_descs(const std::vector<CopyDesc>& descs);
  Status fail(Status s);

  MPI_Comm mpi_comm_;  // borrowed, constant
  int rank_ = 0, size_ = 1;
  int device_ = -1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  // Once the communicator failed (setup or an asynchronous NCCL error), every later GPU
  // collective fails with this: peers cannot be re-synchronized.
  Status broken_;
  DeviceBuffer fusion_;
  DeviceBuffer gather_;
  PinnedBuffer gather_host_;  // the gathered rows on their way to the handle's host Tensor
  DeviceBuffer descs_dev_;
  PinnedBuffer descs_host_;
  std::unique_ptr<HierarchicalAllreduce> hier_;  // KOLO_HIERARCHICAL_ALLREDUCE=1, else null
};

}  // namespace kolo::ops::gpu

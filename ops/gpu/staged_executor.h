// ops/gpu/staged_executor.h — runs collectives on GPU tensors through host memory: copy the
// tensors to a pinned host buffer, run the CPU MPI path on it, copy the result back.
//
// It is the GPU path when NCCL cannot be used: several ranks share one GPU (NCCL refuses
// that), or KOLO_GPU_OPERATIONS=staged. Allreduce packs every tensor into one pinned buffer
// (device-to-host copies), reduces it with MpiExecutor::allreduce_buffer (prescale,
// Average and postscale exactly as on CPU), and copies each tensor back. Broadcast and
// allgather hand the MPI executor host entries that point into the staging buffer
// (allgather's result is the handle's host Tensor, as on CPU).
//
// Copies run on one non-blocking stream per device, created when first needed, and wait
// for each input's ready_event. execute() returns after the copies back have finished, so
// a completed handle's result is visible to the host and to every stream.
//
// Ownership: owns its streams and staging buffer; borrows the MPI executor, which must
// outlive it. Thread safety: constructed on the thread that runs kolo::init; execute()
// runs on the coordinator thread only.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "core/executor.h"
#include "ops/gpu/buffers.h"
#include "ops/mpi_executor.h"

namespace kolo::ops::gpu {

class StagedExecutor final : public Executor {
 public:
  StagedExecutor(MpiExecutor* mpi, int rank) : mpi_(mpi), rank_(rank) {}
  ~StagedExecutor() override;
  StagedExecutor(const StagedExecutor&) = delete;
  StagedExecutor& operator=(const StagedExecutor&) = delete;

  const char* name() const override { return "gpu-staged"; }
  // Only created when the GPU plan chose staging (ops/gpu/gpu_plan.h): every GPU response.
  bool accepts(const Response& r) const override { return !r.device.is_cpu(); }
  Status execute(const Response& r, std::vector<TensorEntry>& entries) override;

 private:
  enum class Direction { kToHost, kToDevice };
  // Copies each entry's bytes between its device memory and staging at `offsets[i]`, on
  // the entry's device stream after its ready_event, then waits for all of them.
  Status copy(std::vector<TensorEntry>& entries, const std::vector<size_t>& offsets, Direction dir);
  Status stream_for(int device, cudaStream_t* out);
  Status allreduce(const Response& r, std::vector<TensorEntry>& entries);
  Status via_mpi(const Response& r, std::vector<TensorEntry>& entries);

  MpiExecutor* mpi_;                   // borrowed, constant
  const int rank_;                     // in kolo's data communicator
  std::vector<cudaStream_t> streams_;  // by device ordinal; nullptr until used
  PinnedBuffer staging_;
};

}  // namespace kolo::ops::gpu

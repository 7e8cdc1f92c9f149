// ops/gpu/gpu_executors.h — builds the GPU executors of the MPI backend (ops/mpi_backend.cc
// calls this inside #ifdef KOLO_HAVE_CUDA, once for the job and once per process set, and
// puts the result in front of the MPI executor).
//
// Collective over the job: every rank reports its CUDA device count and host size
// (MPI_Allgather on `setup.data_comm`), and every rank then applies the same plan
// (ops/gpu/gpu_plan.h) with KOLO_GPU_OPERATIONS (Config::gpu_operations). Result: an NcclExecutor, a StagedExecutor, or, where some rank
// has no GPU, an executor that fails every GPU collective on every rank with that reason.
// A malformed KOLO_GPU_OPERATIONS, or `nccl` where ranks must share a GPU, is an error
// (init() refuses to start). With hierarchical_allreduce, the NCCL executor reduces within
// the host and across hosts separately (ops/gpu/hierarchical.h); the staged executor
// ignores it (its traffic already goes through the CPU path).
//
// Ownership: the caller owns the executors; `mpi` is borrowed and must outlive them.
// Thread safety: call from the thread that runs kolo::init, before the coordinator starts, or
// (a process set's executors, on the set's communicators) from the coordinator thread at the
// set's first response, where every member makes the same call.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/executor.h"
#include "ops/mpi_executor.h"

namespace kolo::ops::gpu {

// kolo's communicators (borrowed; they outlive the executors) and the GPU knobs.
struct GpuExecutorSetup {
  MPI_Comm data_comm = MPI_COMM_NULL;   // every rank
  MPI_Comm local_comm = MPI_COMM_NULL;  // the ranks of this host
  MPI_Comm cross_comm = MPI_COMM_NULL;  // the ranks with this local rank, one per host
  std::string gpu_operations = "auto";  // KOLO_GPU_OPERATIONS
  bool hierarchical_allreduce = false;  // KOLO_HIERARCHICAL_ALLREDUCE (NCCL executor only)
};

Status create_gpu_executors(const GpuExecutorSetup& setup, const Topology& topo, MpiExecutor* mpi,
                            std::vector<std::unique_ptr<Executor>>* out);

}  // namespace kolo::ops::gpu

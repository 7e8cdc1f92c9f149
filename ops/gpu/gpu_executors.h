// ops/gpu/gpu_executors.h — builds the GPU executors of the MPI backend (ops/mpi_backend.cc
// calls this once, inside #ifdef KOLO_HAVE_CUDA, and puts the result in front of the MPI
// executor).
//
// Collective over the job: every rank reports its CUDA device count and host size
// (MPI_Allgather on `data_comm`), and every rank then applies the same plan
// (ops/gpu/gpu_plan.h) with KOLO_GPU_OPERATIONS (Config::gpu_operations). Result: an NcclExecutor, a StagedExecutor, or, where some rank
// has no GPU, an executor that fails every GPU collective on every rank with that reason.
// A malformed KOLO_GPU_OPERATIONS, or `nccl` where ranks must share a GPU, is an error
// (init() refuses to start).
//
// Ownership: the caller owns the executors; `mpi` is borrowed and must outlive them.
// Thread safety: call from the thread that runs kolo::init, before the coordinator starts.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/executor.h"
#include "ops/mpi_executor.h"

namespace kolo::ops::gpu {

Status create_gpu_executors(MPI_Comm data_comm, const Topology& topo, const std::string& gpu_operations,
                            MpiExecutor* mpi, std::vector<std::unique_ptr<Executor>>* out);

}  // namespace kolo::ops::gpu

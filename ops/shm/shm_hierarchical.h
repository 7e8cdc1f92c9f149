// ops/shm/shm_hierarchical.h — the parts of the shared-memory engine that need MPI: the
// out-of-band agreement for ShmGroup::create, and the allreduce across hosts.
//
// Hierarchical allreduce: reduce within the host into local rank 0 through shared memory ->
// MPI_Allreduce among the local rank 0s of all hosts (`cross_comm`) -> broadcast within the
// host through shared memory. Within a host only one process touches the network; every
// rank ends with bitwise the leader's result. fp16/bf16 travel as float32 through the first
// two stages (the host's partial sums are not rounded to 16 bits) and are rounded once, on
// the leader, after the post-scale.
//
// Ownership: borrows the group, communicators and buffers for the call.
// Thread safety: coordinator thread only (it makes MPI calls on kolo's communicators).
#pragma once

#include <mpi.h>

#include <span>

#include "ops/shm/shm_group.h"

namespace kolo::shm {

// ShmGroup::Agree over `local_comm` (the ranks of this host): MPI_Allreduce(MPI_MIN).
ShmGroup::Agree mpi_agree(MPI_Comm local_comm);

struct HierarchicalComms {
  MPI_Comm cross_comm = MPI_COMM_NULL;  // local rank 0 of every host; MPI_COMM_NULL elsewhere
  int global_size = 1;                  // ranks in the whole job (kAverage divides by it)
  Liveness* liveness = nullptr;         // consulted while the leaders' MPI requests are polled
};

// Allreduce of `pieces` over every rank of the job. Prescale applies to each rank's input;
// kAverage divides by global_size; postscale applies last, on the leader, before the
// broadcast. An MPI failure on a leader breaks the local group so its peers stop at once.
Status hierarchical_allreduce(ShmGroup& local, const HierarchicalComms& comms,
                              std::span<const Piece> pieces, DType dtype, ReduceOp op,
                              double prescale = 1.0, double postscale = 1.0);

}  // namespace kolo::shm

// ops/shm/shm_hierarchical.h — the parts of the shared-memory engine that need MPI: the
// out-of-band agreement for ShmGroup::create, and the allreduce across hosts.
//
// Two ways across hosts (docs/hosts.md, "The allreduce across hosts"):
//
// Sliced (the default where every host has the same number of ranks): the buffer goes in
// chunks; per chunk, a reduce-scatter within the host through shared memory gives local rank
// i the host's sum of slice i; local rank i allreduces that slice with local rank i of every
// other host (a ring over point-to-point MPI on their own communicator, cross_ring.h); an
// allgather within the host spreads the finished slices. Every local rank carries its share
// of the traffic between hosts at once, and up to kSlicedInFlight chunks are between hosts
// while the next chunk is reduced within the host (the pipeline). Every element is combined
// once and copied everywhere: every rank ends with bitwise the same values.
//
// Leader (uneven hosts, or KOLO_CROSS_HOST_ALLREDUCE=leader): reduce within the
// host into local rank 0 through shared memory -> MPI_Allreduce among the local rank 0s of
// all hosts -> broadcast within the host through shared memory. Within a host only one
// process touches the network; every rank ends with bitwise the leader's result. fp16/bf16
// travel as float32 through the first two stages (the host's partial sums are not rounded to
// 16 bits) and are rounded once, on the leader, after the post-scale.
//
// Ownership: borrows the group, communicators and buffers for the call; SlicedState is owned
// by the executor (MPI may still hold its buffers after a failed call).
// Thread safety: coordinator thread only (it makes MPI calls on kolo's communicators).
#pragma once

#include <mpi.h>

#include <span>

#include <cstddef>
#include <memory>
#include <vector>

#include "ops/shm/cross_ring.h"
#include "ops/shm/shm_group.h"

namespace kolo::shm {

// Chunks of the sliced allreduce between hosts at once (each with its own staging buffer).
constexpr int kSlicedInFlight = 4;

// What the sliced allreduce keeps between calls: the ring on the communicator of this
// rank's local rank across hosts, and one staging buffer per chunk in flight.
struct SlicedState {
  explicit SlicedState(MPI_Comm slice_comm, Liveness* liveness) : ring(slice_comm, liveness) {}
  CrossRing ring;
  std::vector<std::vector<std::byte>> stage;  // a chunk's slice between hosts (float32 for fp16/bf16)
  std::vector<std::byte> narrow;              // fp16/bf16: the finished slices in 16 bits, one per chunk in flight
  // fp16/bf16 between hosts: true = in 16 bits (half the bytes; a partial is rounded at each
  // host it leaves), false = in float32 and rounded once (KOLO_CROSS_HOST_HALF_WIRE=float32).
  bool half_wire = true;
};

// ShmGroup::Agree over `local_comm` (the ranks of this host): MPI_Allreduce(MPI_MIN).
ShmGroup::Agree mpi_agree(MPI_Comm local_comm);

struct HierarchicalComms {
  MPI_Comm cross_comm = MPI_COMM_NULL;  // local rank 0 of every host; MPI_COMM_NULL elsewhere
  int global_size = 1;                  // ranks in the whole job (kAverage divides by it)
  Liveness* liveness = nullptr;         // consulted while the leaders' MPI requests are polled
  SlicedState* sliced = nullptr;        // set on every rank, or none: the sliced path
};

// Allreduce of `pieces` over every rank of the job, sliced where comms.sliced is set, else
// through the leaders. fp16/bf16 values are combined in float32 within a host; between hosts
// the sliced path sends them in 16 bits (SlicedState::half_wire; a sum or average is then
// scaled before it leaves the host), the leaders' path in float32 with one rounding at the
// end. Prescale applies to each rank's
// input; kAverage divides by global_size; postscale applies last, once per element (by the
// host that finishes it), before it is spread. An MPI failure breaks the local group so the
// host's other ranks stop at once.
Status hierarchical_allreduce(ShmGroup& local, const HierarchicalComms& comms,
                              std::span<const Piece> pieces, DType dtype, ReduceOp op,
                              double prescale = 1.0, double postscale = 1.0);

// The sliced path alone (hierarchical_allreduce picks it). REQUIRES: comms.sliced.
Status sliced_allreduce(ShmGroup& local, const HierarchicalComms& comms, std::span<const Piece> pieces,
                        DType dtype, ReduceOp op, double prescale, double postscale);

}  // namespace kolo::shm

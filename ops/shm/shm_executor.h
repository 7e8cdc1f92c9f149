// ops/shm/shm_executor.h — ShmExecutor: kolo's Executor for CPU collectives through the
// shared-memory engine (ShmGroup), in front of the MPI executor.
//
// One host (every rank of the job shares it): allreduce, broadcast, allgather, alltoall and
// reducescatter all run through shared memory. Several hosts: allreduce runs hierarchically
// (shared memory within the host, MPI between one leader per host); the others are declined and fall
// through to the MPI executor, and so are float sums under Options::deterministic. The choice depends only on the topology and the response,
// which every rank shares, so every rank picks the same executor.
//
// A fused allreduce is reduced in place on the tensors themselves (ShmGroup takes a list of
// pieces), so there is no copy into and out of a fusion buffer. With Options::arena_bytes
// (or arena_auto) a ShmArena is created too and published as the memory behind kolo/memory.h
// (allocate_shared): a trainer that allocates its gradients there gets the zero-copy path
// (on one host) for every response whose tensors all lie in it and that is larger than the
// one-step path's limit (below it one barrier beats zero copy's three). All ranks must then
// allocate alike; a rank whose tensors are not in the arena (or at other offsets) while its
// peers' are makes that collective fail on every rank with a mismatch naming the tensors and
// the ranks on each side, at its first step, before anything is written; the group stays
// usable and the next collective runs normally.
//
// Ownership: owns the host's ShmGroup (and the sliced path's buffers); borrows the communicators (owned by the backend),
// which must outlive it. Thread safety: coordinator thread only.
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/executor.h"
#include "ops/shm/shm_arena.h"
#include "ops/shm/shm_group.h"
#include "ops/shm/shm_hierarchical.h"
#include "ops/shm/shm_result_pool.h"

namespace kolo::shm {

// The largest arena per rank that KOLO_SHM_ARENA_BYTES=auto reserves.
constexpr size_t kAutoArenaMaxBytes = size_t{2} << 30;

class ShmExecutor final : public Executor {
 public:
  struct Options {
    // The pipelining chunk (one slot); the segment is 2 x local_size x chunk_bytes. Pass the
    // fusion threshold, so a fused response is one chunk: two barriers.
    size_t chunk_bytes = 4u << 20;
    size_t small_bytes = ShmGroup::Options{}.small_bytes;
    std::chrono::milliseconds peer_timeout = ShmGroup::Options{}.peer_timeout;
    // The zero-copy arena (kolo/memory.h), per rank; 0 = none. Reserved lazily: pages are
    // committed as allocate_shared() hands them out. Failure to set it up fails create().
    size_t arena_bytes = 0;
    // Instead (KOLO_SHM_ARENA_BYTES=auto): where zero copy applies (one host, >= 2 ranks),
    // min(kAutoArenaMaxBytes, size of /dev/shm / local ranks); if it cannot be set up,
    // create() carries on without one (info log), on every rank alike.
    bool arena_auto = false;
    // Whether this executor's arena (or the lack of one) is what kolo/memory.h hands out:
    // true for the global set's executor only; a process set's executor (no arena) must not
    // unpublish the job's arena when it is made or destroyed.
    bool publishes_arena = true;
    size_t arena_chunk_bytes = ShmGroup::Options{}.arena_chunk_bytes;
    // The runtime's dead-peer check (borrowed, may be null), consulted by every wait.
    Liveness* liveness = nullptr;
    // The fast path's board (core/fast_board.h) for response-cache ids below this; 0 = none.
    // Made only on one host with two ranks or more; failing to make it leaves it out on
    // every rank alike (the fast path is an optimisation).
    size_t fast_board_capacity = 0;
    // Across hosts: the sliced allreduce (every local rank carries its slice between hosts;
    // shm_hierarchical.h) where every host has the same number of ranks; false: the leaders
    // carry it all (KOLO_CROSS_HOST_ALLREDUCE=leader).
    bool sliced_cross_host = true;
    // fp16/bf16 on the sliced path: 16 bits between hosts (true) or float32 with one
    // rounding (KOLO_CROSS_HOST_HALF_WIRE=float32). Ranks that disagree all take float32.
    bool half_wire = false;
    // KOLO_DETERMINISTIC=1: across hosts, float sums, averages and products are declined and
    // left to the MPI executor's rank-ordered allreduce (ops/ordered_allreduce.h), whose
    // bits equal the rank-order fold this executor computes on one host. Every rank must
    // pass the same (the backend agrees on it first).
    bool deterministic = false;
    // Alltoall results are allocated in a shared pool of this many bytes per rank (sparse;
    // committed as used) on one host with two ranks or more, so that peers write their
    // blocks straight into them (shm_result_pool.h); 0 = none. Failing to make it leaves it
    // out on every rank alike.
    size_t result_pool_bytes = size_t{256} << 20;
  };

  // Collective over the whole job (MPI calls on `world` and `local`). `local`: the ranks of
  // this host, ordered by world rank; `cross`: on local rank 0, the local rank 0s of all
  // hosts. Fails on every rank if it fails on any host, so that no rank uses shared memory
  // while another does not; likewise every rank has an arena or none does.
  static Status create(const Topology& topo, MPI_Comm world, MPI_Comm local, MPI_Comm cross,
                       const Options& options, std::unique_ptr<ShmExecutor>* out);

  ~ShmExecutor() override;
  const char* name() const override { return "shm"; }
  bool accepts(const Response& r) const override;
  Status execute(const Response& r, std::vector<TensorEntry>& entries) override;

  ShmGroup& group() { return *group_; }
  // True where allreduce across hosts takes the sliced path (shm_hierarchical.h).
  bool sliced() const { return sliced_ != nullptr; }
  // True where fp16/bf16 travel in 16 bits on the sliced path (SlicedState::half_wire).
  bool half_wire() const { return sliced_ != nullptr && sliced_->half_wire; }
  // The shared gradient memory, or nullptr without one (Options::arena_bytes/arena_auto).
  ShmArena* arena() { return arena_.get(); }
  // Zeroed shared memory for the fast path's board, or nullptr (Options::fast_board_capacity).
  void* fast_board() { return board_.mapped() ? board_.data() : nullptr; }

 private:
  ShmExecutor() = default;
  Status allreduce(const Response& r, std::vector<TensorEntry>& entries);
  Status broadcast(const Response& r, std::vector<TensorEntry>& entries);
  Status allgather(const Response& r, std::vector<TensorEntry>& entries);
  Status alltoall(const Response& r, std::vector<TensorEntry>& entries);
  Status reducescatter(const Response& r, std::vector<TensorEntry>& entries);
  bool zero_copy(DType dtype) const;  // pieces_ go down the zero-copy path
  // After a placement mismatch (ShmGroup::allreduce): the error naming the tensors.
  Status placement_error(const Response& r);

  std::unique_ptr<ShmGroup> group_;
  std::unique_ptr<ShmArena> arena_;
  ShmResultPool* pool_ = nullptr;  // never deleted: retired in the destructor
  SharedMapping board_;
  HierarchicalComms comms_;
  std::unique_ptr<SlicedState> sliced_;  // the sliced path's ring and buffers, or none
  bool single_host_ = true;
  bool deterministic_ = false;  // Options::deterministic
  bool publishes_arena_ = true;  // Options::publishes_arena
  std::vector<Piece> pieces_;  // scratch, reused per response
  uint64_t zero_copy_calls_ = 0;
};

}  // namespace kolo::shm

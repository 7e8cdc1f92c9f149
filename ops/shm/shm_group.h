// ops/shm/shm_group.h — ShmGroup: allreduce, broadcast and allgatherv among the processes
// of one host through a shared-memory segment. MPI-free; the hierarchical (multi-host)
// composition lives in shm_hierarchical.h.
//
// How it works. A segment is created at start-up by local rank 0, mapped by every local
// rank, and unlinked by name as soon as all have mapped it. After a small control block its
// data area holds two halves of `local_size` slots each (see shm_sync.h for why two).
//   * allreduce, large: the buffer is processed in chunks of one slot. Per chunk, each rank
//     copies the chunk (less its own slice) into its slot (reduce-scatter input), then sums
//     slice r of the chunk from every rank — rank 0's values first — into slice r of its
//     slot in the other half and into its own buffer, then copies every other rank's reduced
//     slice back (all-gather). Two steps per chunk; the shared data of a chunk (a few MB)
//     stays in the L3 cache, and the user's buffer is read once and written once — about
//     one memcpy of it per rank, which is the floor for private buffers.
//   * a list of pieces (the tensors of a fused response) is reduced in place as one buffer.
//   * zero copy: allreduce_in_arena reads peers' buffers that live in a ShmArena.
//   * allreduce, small (<= Options::small_bytes): one step — every rank publishes its buffer
//     and every rank reduces all of them, in the same order. One barrier, no syscall.
//   * broadcast: the root writes a half at a time while the others read the previous one.
//   * allgatherv: every rank publishes a slot's worth of its input per step.
//   * alltoallv: each slot is cut into local_size sub-slots, one per destination; per step
//     every rank publishes the next piece of what it sends to each rank, and every rank
//     copies its pieces out of the others' slots (its own block is copied directly).
//     Larger blocks go in one copy instead (the direct path): every rank publishes where
//     its input and its result lie. A result in a ShmResultPool (shm_result_pool.h) is
//     written by each sender straight from its input (plain memcpy); a rank whose result
//     is private memory reads its blocks out of the peers' inputs with process_vm_readv
//     (Linux cross-memory attach, as Open MPI's shared-memory transport does). The ranks
//     meet again before any returns. Two barriers in all; one where the previous call
//     (with no group step since) already told every rank where each receiver's next
//     pooled result lies (each rank reserves its next result block then). Where the kernel refuses
//     cross-memory attach (ptrace rules), every rank stops using it for good, and a call
//     that needed it runs again through the slots.
//   * reduce_scatter: the same sub-slots carry the pieces of each destination's part;
//     every rank reduces its part from all ranks (rank 0's values first, as allreduce does).
//     One step per sub-slot of the largest part.
// Every rank gets bitwise the same result: one reduction order for all (shm_kernels.h).
//
// Failure. Every call returns a Status. A peer that does not arrive within
// Options::peer_timeout gives kTimeout, a peer whose process died gives kAborted, ranks that
// call different collectives give kMismatch; each names the local rank at fault. After any
// failure the group is broken for good (the steps cannot be resynchronised): every later
// call returns the first error, and the other ranks see it within one poll.
//
// Ownership: create() hands out the only owner. Caller buffers are borrowed for the call.
// Thread safety: not thread-safe; one thread (kolo's coordinator) makes all calls, and all
// local ranks must make the same calls in the same order with matching arguments.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "kolo/types.h"
#include "ops/shm/shm_segment.h"
#include "ops/shm/shm_sync.h"

namespace kolo::shm {

// One contiguous run of elements. A collective over several pieces treats them as one
// buffer laid end to end — a fused response can be reduced in place, without a copy into a
// fusion buffer.
struct Piece {
  void* data = nullptr;
  size_t count = 0;  // elements
};

class ShmArena;
class ShmResultPool;

namespace detail {
// The descriptor that ranks compare at the first step of an allreduce (slot or zero-copy
// path alike, so that ranks on different paths differ only in `placement`) or
// reduce_to_leader; and those of alltoallv and reduce_scatter.
CallDesc describe_reduce(bool to_leader, DType dtype, ReduceOp op, size_t count, uint64_t placement = 0);
CallDesc describe_alltoallv(const std::vector<size_t>& matrix);
CallDesc describe_sliced(DType dtype, ReduceOp op, size_t total);
CallDesc describe_reduce_scatter(DType dtype, ReduceOp op, const std::vector<size_t>& parts);
}  // namespace detail

// Where the pieces lie, as the ranks compare it (CallDesc::placement): a hash over every
// piece of (its offset in this rank's region of `arena` + 1, or 0 for memory outside the
// arena; its count). Equal on every rank exactly when every tensor is in the arena at the
// same offset on every rank, or outside it on every rank. Never 0.
uint64_t placement_of(const ShmArena& arena, std::span<const Piece> pieces, size_t esize);
// The per-piece values that placement_of hashes (offset + 1, or 0), for error messages.
uint64_t piece_placement(const ShmArena& arena, const Piece& piece, size_t esize);

// The message of a call that failed only because the ranks' buffers lie in different
// places (ShmGroup::allreduce, allreduce_in_arena); Status code kMismatch.
inline constexpr const char* kPlacementMismatch =
    "shared memory: the ranks' buffers of this allreduce lie in different places (kolo's "
    "shared memory on some ranks and private memory on others, or different offsets)";

class ShmGroup {
 public:
  struct Options {
    std::string name;           // unique per job and host, e.g. "/kolo-<jobid>-<host>"
    int local_rank = 0;
    int local_size = 1;
    // Data area; split into 2 halves x local_size slots (each rounded down to 4 KiB). The
    // slot is the pipelining chunk. Measured here (np=2, a busy 2-core machine): 4 MiB slots
    // beat 1 MiB ones by 1.3-1.7x — each chunk costs two barriers, and a barrier costs
    // ~0.5 us idle but up to ~100 us when a peer is descheduled — while 8 MiB slots start to
    // fall out of the 32 MB L3. Size it from the fusion threshold: 2 x local_size x threshold
    // makes every fused response one chunk (ShmExecutor does that).
    size_t segment_bytes = 16u << 20;
    // Allreduces up to this many bytes take the one-step path (clamped to the slot size):
    // one barrier instead of two; reading every rank's copy costs no more than the
    // chunked path's extra pass below about the L2 size.
    size_t small_bytes = 256u << 10;
    // Bound on every wait for a peer. Generous: within kolo the coordinator calls a
    // collective only once all ranks have negotiated it, so peers arrive within ms.
    std::chrono::milliseconds peer_timeout{60000};
    // allreduce_in_arena's pipelining chunk: one barrier per chunk; a rank copies its peers'
    // results of a chunk while they are still in the L3 cache.
    size_t arena_chunk_bytes = 4u << 20;
    // alltoallv: when the largest block between two different ranks is at least this many
    // bytes, the ranks read each other's inputs directly (one copy, a system call per
    // block; see above) instead of going through the slots (two copies, no system call).
    // SIZE_MAX: never (nor for a private result on the pool's direct path). The crossover
    // measured here (np=2, busy 2-core machine) lies between 64 KiB and 256 KiB.
    size_t single_copy_min_bytes = 256u << 10;
    // alltoallv given a result pool: the direct path from blocks of this many bytes (one
    // copy, no system call, but a second barrier).
    size_t pool_direct_min_bytes = 16u << 10;
    // alltoallv given a result pool: results up to this many bytes reserve the rank's next
    // result block, so that the next call can skip the first barrier. Larger ones do not:
    // the barrier saved (~5 us at np=4 on 2 cores) is under 2 % of a 1 MB call, and a third
    // block in rotation costs cache warmth (np=4 1 MB A/B: 0.95-1.23x MPI vs 0.85-1.02x).
    size_t reserve_max_bytes = 256u << 10;
  };

  // Out-of-band agreement among the local ranks (shm_segment.h); create() uses it twice.
  using Agree = shm::Agree;

  // Collective over the local ranks. On success *out owns the group; on failure every rank
  // returns an error and no segment name is left behind.
  static Status create(const Options& options, const Agree& agree,
                       std::unique_ptr<ShmGroup>* out);
  ~ShmGroup();
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  // In-place allreduce. Each rank's values are multiplied by `prescale` first; the result is
  // divided by local_size for kAverage and multiplied by `postscale` (ops::apply_postscale);
  // fp16/bf16 are reduced in float32 and rounded once (shm_kernels.h).
  // `placement` (placement_of; 0: not checked) must be equal on every rank: where it is not
  // (or a peer calls allreduce_in_arena instead) every rank returns kMismatch with
  // kPlacementMismatch at the first step, before writing any result, and the group stays
  // usable — only this call fails.
  Status allreduce(void* buf, size_t count, DType dtype, ReduceOp op, double prescale = 1.0,
                   double postscale = 1.0);
  Status allreduce(std::span<const Piece> pieces, DType dtype, ReduceOp op,
                   double prescale = 1.0, double postscale = 1.0, uint64_t placement = 0);

  // Zero-copy allreduce: like allreduce(), for pieces that lie in this rank's region of
  // `arena` at the same offsets on every rank (ShmArena::allocate gives that when all ranks
  // allocate alike; checked). Each rank reduces its slice reading the peers' regions in
  // place and then copies the other slices from their owners: no copy into the slots; one
  // barrier per Options::arena_chunk_bytes plus two. The scales are applied as the slices are
  // reduced; nothing is written before every rank has agreed on the call and the placement
  // (a different placement: kMismatch on every rank, group intact, as for allreduce).
  Status allreduce_in_arena(const ShmArena& arena, std::span<const Piece> pieces, DType dtype,
                            ReduceOp op, double prescale = 1.0, double postscale = 1.0);

  // Copies `bytes` from local rank `root`'s buf into every other rank's buf.
  Status broadcast(void* buf, size_t bytes, int root);

  // out = the inputs of local ranks 0..n-1 laid end to end; rank j contributes
  // bytes_per_rank[j] bytes. `in` may be out + (sum of the sizes before this rank).
  Status allgatherv(const void* in, void* out, const std::vector<size_t>& bytes_per_rank);

  // Alltoall: `bytes` is the local_size x local_size matrix of byte counts, bytes[s * n + d]
  // sent by local rank s to local rank d (the same on every rank). `in` holds this rank's
  // blocks for ranks 0, 1, ... end to end; `out` receives the blocks from ranks 0, 1, ...
  // end to end. in and out must not overlap. `pool`: the host's result pool, `arena` the
  // host's shared gradient memory (each the same one, or none, on every rank); where `out`
  // lies in either (in this rank's live blocks), peers write their blocks straight there.
  Status alltoallv(const void* in, void* out, const std::vector<size_t>& bytes,
                   ShmResultPool* pool = nullptr, const ShmArena* arena = nullptr);

  // Reduce-scatter: every rank passes `count` elements; local rank d receives elements
  // [part_lo[d], part_lo[d + 1]) (part_lo has local_size + 1 entries, from 0 to count) of the
  // reduction (op, prescale, postscale, kAverage dividing by local_size) in `out`.
  Status reduce_scatter(const void* in, void* out, const std::vector<size_t>& part_lo, DType dtype,
                        ReduceOp op, double prescale = 1.0, double postscale = 1.0);

  // The combination (op, no postscale; kAverage combines like kSum) of every rank's prescaled
  // buffer lands in local rank 0's buffer; the other ranks' buffers are left unchanged.
  Status reduce_to_leader(void* buf, size_t count, DType dtype, ReduceOp op,
                          double prescale = 1.0);
  Status reduce_to_leader(std::span<const Piece> pieces, DType dtype, ReduceOp op,
                          double prescale = 1.0);

  // The two steps of the sliced hierarchical allreduce (shm_hierarchical.h), for one chunk
  // [off, off + m) of the pieces (seen as one buffer of `total` elements), sliced among the
  // local ranks as detail::Slicing(m, local_size, esize) slices it (shm_pieces.h).
  // reduce_slice: one step; this rank's slice of the chunk, combined over every local rank's
  // prescaled values (op; rank 0's first; kAverage combines like kSum; no postscale), is
  // written to `out` (the slice's length, private memory; for fp16/bf16 `out` holds float32,
  // combined in float32 and not rounded). On `first` (the call's first
  // step) the ranks compare the call (dtype, op, total) as allreduce does.
  Status reduce_slice(std::span<const Piece> pieces, size_t total, size_t off, size_t m, DType dtype,
                      ReduceOp op, double prescale, void* out, bool first);
  // gather_slices: one step; `mine` (this rank's finished slice of the chunk) and every
  // other local rank's finished slice land in the pieces.
  Status gather_slices(std::span<const Piece> pieces, size_t off, size_t m, DType dtype, const void* mine);

  // Breaks the group on every local rank with `why` (returned): for a caller whose own step
  // between two shared-memory collectives failed (the MPI stage of the hierarchical
  // allreduce), so that peers waiting on it stop now instead of at their timeout.
  Status abort(Status why) { return record(std::move(why)); }

  // Every wait for a peer also consults `watch` (PeerSync::set_watch): kolo's dead-peer check.
  void set_watch(std::function<Status()> watch) { sync_.set_watch(std::move(watch)); }
  // ... and runs `idle` on every round of the wait (PeerSync::set_idle).
  void set_idle(std::function<Status()> idle) { sync_.set_idle(std::move(idle)); }

  int local_rank() const { return opts_.local_rank; }
  int local_size() const { return opts_.local_size; }
  size_t slot_bytes() const { return slot_bytes_; }
  // Allreduces up to this many bytes take the one-step path (Options::small_bytes, clamped).
  size_t small_bytes() const { return opts_.small_bytes; }
  // ok, or the failure that broke the group.
  const Status& health() const { return broken_; }

 private:
  explicit ShmGroup(const Options& options);
  Status attach(const Agree& agree);
  Status usable();
  Status record(Status s);
  char* slot(uint64_t step, int rank) const;

  enum class Target { kAll, kLeader };
  Status reduce(std::span<const Piece> pieces, DType dtype, ReduceOp op, double prescale,
                double postscale, Target target, uint64_t placement = 0);
  // The first step of an allreduce: waits for every rank and compares the calls (a different
  // call breaks the group); a different placement fails this call alone.
  Status agree_first(uint64_t e);
  Status reduce_small(std::span<const Piece> pieces, size_t total, DType dtype, ReduceOp op,
                      double prescale, double postscale, Target target, const CallDesc& d);
  Status reduce_chunked(std::span<const Piece> pieces, size_t total, DType dtype, ReduceOp op,
                        double prescale, double postscale, Target target, const CallDesc& d);

  // alltoallv's direct path (shm_alltoall.cc): every block crosses once, written into a
  // result in the pool or the arena by its sender or read from the sender's input by the
  // receiver. *done is false where a rank could not get its blocks (single_copy_ then off
  // for good on every rank alike if a read failed); the caller then runs the slots.
  Status alltoallv_direct(const char* in, char* out, const std::vector<size_t>& m,
                          const std::vector<size_t>& send_lo, const std::vector<size_t>& recv_lo,
                          ShmResultPool* pool, const ShmArena* arena, const CallDesc& desc, bool* done);
  // The direct path in one step, where the previous call (with no group step since) told
  // every rank each receiver's next result block (reserved in the pool): see shm_alltoall.cc.
  bool reserved_fits(const std::vector<size_t>& m) const;
  Status alltoallv_reserved(const char* in, char* out, const std::vector<size_t>& m,
                            const std::vector<size_t>& send_lo, const std::vector<size_t>& recv_lo,
                            ShmResultPool* pool, const ShmArena* arena, const CallDesc& desc);
  // At the direct paths' last step: this rank's next result block, to publish (pool->reserve).
  void reserve_next(ShmResultPool* pool, size_t bytes, uint64_t* offset, uint64_t* room);
  // After that step: every rank's published block, usable by the next call at step e + 1.
  void read_reserved(uint64_t e);

  Options opts_;
  SharedMapping mapping_;
  PeerSync sync_;
  char* data_ = nullptr;     // start of the data area
  size_t slot_bytes_ = 0;
  Status broken_;            // sticky
  std::vector<const void*> srcs_;  // scratch: one source pointer per rank
  std::vector<std::byte> block_;   // scratch: one reduced block of allreduce_in_arena
  bool single_copy_ = true;        // cross-memory attach works between the local ranks
  // alltoallv: each local rank's next result block in the pool (offset; room in bytes), as
  // published at step reserved_at_ (0: none); offset ShmResultPool::kNone where a rank has none.
  std::vector<uint64_t> next_offset_, next_room_;
  uint64_t reserved_at_ = 0;
};

}  // namespace kolo::shm

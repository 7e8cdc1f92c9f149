// ops/shm/shm_result_pool.h — ShmResultPool: shared memory that collective results are
// allocated in, so that local peers can write their part of a result straight into it.
//
// Why. An alltoall's result is a Tensor kolo allocates. If it lies in a segment every local
// rank has mapped, each sender copies its block from its (private) input into the
// receiver's result: one copy per byte, made in user space, with no system call — where
// reading a peer's private input needs process_vm_readv (a syscall that pins the pages)
// and going through the segment's slots needs two copies (ShmGroup::alltoallv).
//
// How. A segment of local_size regions of bytes_per_rank each (sparse: pages are committed
// in /dev/shm as blocks first reach them, never given back while the pool lives). A rank
// allocates only in its own region: blocks are whole pages, first fit from the lowest
// offset, so a result freed before the next call gets the same (cache-warm) block again.
// The pool is a detail::TensorMemorySource (core/tensor_memory.h): the executor allocates
// a result under a TensorSourceScope, and the Tensor gives the block back when freed, on
// any thread. When /dev/shm or the region is full, take() says no and the heap serves.
//
// Ownership: create() gives out a pointer that is never deleted (sources stay registered
// for good). retire() is the owner's last call: the segment is unmapped at once if no
// block is out, else when the last block comes back — so a result the user keeps after
// kolo shut down stays valid.
// Thread safety: take/give/holds/offset_of from any thread; create/retire from one owner.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>

#include "core/tensor_memory.h"
#include "kolo/status.h"
#include "ops/shm/shm_segment.h"

namespace kolo::shm {

class ShmResultPool final : public kolo::detail::TensorMemorySource {
 public:
  struct Options {
    std::string name;  // unique per job and host
    int local_rank = 0;
    int local_size = 1;
    size_t bytes_per_rank = 0;  // rounded up to 4 KiB
  };
  // What offset_of answers for memory outside this rank's live blocks.
  static constexpr size_t kNone = ~size_t{0};

  // Collective over the local ranks (SharedMapping::establish). On success *out is a
  // registered pool; on failure every rank gets an error and *out is unchanged.
  static Status create(const Options& options, const Agree& agree, ShmResultPool** out);

  void* take(size_t bytes) override;
  bool holds(const void* p) const override;
  void give(void* p) noexcept override;

  // Where `p` lies in this rank's region, when it is in a live block with `bytes` of room
  // from p on; kNone otherwise.
  size_t offset_of(const void* p, size_t bytes) const;
  // Local rank `rank`'s region as mapped here (valid until retire()).
  char* region(int rank) const { return base_ + static_cast<size_t>(rank) * bytes_per_rank_; }
  size_t bytes_per_rank() const { return bytes_per_rank_; }
  // Blocks handed out and not yet given back (for tests; a reserved block not out is not one).
  size_t live_blocks() const;

  // Alltoall's next result (ShmGroup::alltoallv): a block of at least `bytes` held back for
  // this rank's next result, so that peers may write into it before this rank asks for one.
  // Returns its offset; kNone when none can be had, or while the reserved block is out (taken
  // and not yet consumed). take() hands the reserved block out first where it fits; give()
  // of it before consume_reserved() keeps it reserved — it is never free while a peer may
  // write into it. A reserved block too small for `bytes` (and not out) is freed first.
  // *room (if given) gets the block's bytes.
  size_t reserve(size_t bytes, size_t* room = nullptr);
  // The reserved block's offset (kNone: none); *out says whether it is taken.
  size_t reserved(bool* out = nullptr) const;
  // The reserved block, taken as a result, becomes an ordinary block (give() frees it).
  void consume_reserved();

  // The owner is done: no more take(); the segment goes when the last block comes back.
  void retire();

 private:
  ShmResultPool() = default;
  ~ShmResultPool() = default;
  void unmap_if_done();  // mu_ held
  size_t carve(size_t want);   // mu_ held: a live block of `want` bytes (whole pages), or kNone
  void release(size_t at);     // mu_ held: the live block at `at` goes back to free_

  mutable std::mutex mu_;
  SharedMapping mapping_;                    // guarded by mu_ once created
  char* base_ = nullptr;                     // region 0 (fixed after create)
  char* own_ = nullptr;                      // this rank's region (fixed after create)
  size_t bytes_per_rank_ = 0;
  size_t own_offset_ = 0;                    // of own_ in the segment
  std::atomic<bool> mapped_{false};          // holds() answers false once unmapped
  bool retired_ = false;                     // guarded by mu_
  size_t committed_ = 0;                     // guarded by mu_: own region's committed prefix
  std::map<size_t, size_t> free_;            // guarded by mu_: offset -> bytes, merged
  std::map<size_t, size_t> live_;            // guarded by mu_: offset -> bytes
  size_t reserved_ = kNone;                  // guarded by mu_: the reserved block (in live_)
  size_t reserved_bytes_ = 0;                // guarded by mu_
  bool reserved_out_ = false;                // guarded by mu_: taken, not yet consumed
};

}  // namespace kolo::shm

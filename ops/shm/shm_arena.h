// ops/shm/shm_arena.h — ShmArena: memory that every local rank can read, for zero-copy
// allreduce. A model that keeps its gradients in one contiguous buffer (llm.c style)
// allocates that buffer here; ShmGroup::allreduce_in_arena then reduces straight out of the
// ranks' buffers, with no copy into the engine's slots.
//
// Layout: one segment (created, mapped and unlinked like ShmGroup's) holding one region of
// `bytes_per_rank` per local rank. allocate() hands out this rank's region front to back,
// 64-byte aligned, so ranks that make the same allocations in the same order get the same
// offsets — which is what allreduce_in_arena requires (it checks). Memory is returned all at
// once by reset() or with the arena, or the latest allocation alone by release_last().
//
// Commit: the segment is reserved lazily (Commit::kLazy: sized, not backed), so a large
// arena costs nothing until used. allocate() commits the pages of the range it hands out
// (this rank's region only) and fails cleanly — nullptr and a Status naming /dev/shm, the
// bytes and the errno text — when /dev/shm cannot back them. Ranks share /dev/shm, so one
// rank's allocation can fail while a peer's succeeds: callers that need every rank alike
// agree afterwards and undo with release_last() (DistributedOptimizer does).
//
// Ownership: create() hands out the only owner; memory from allocate() is valid until
// reset(), release_last() of it, or destruction. Peers' regions are readable by design:
// keep only gradients here.
// Thread safety: allocate()/release_last()/reset() on one thread at a time; the memory
// itself is ordinary memory for the model's threads, but must not be written while an
// allreduce on it runs.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kolo/status.h"
#include "ops/shm/shm_segment.h"

namespace kolo::shm {

class ShmArena {
 public:
  struct Options {
    std::string name;  // unique per job and host, and not a ShmGroup's name
    int local_rank = 0;
    int local_size = 1;
    size_t bytes_per_rank = 0;  // rounded up to 4 KiB
  };

  // Collective over the local ranks, like ShmGroup::create.
  static Status create(const Options& options, const Agree& agree, std::unique_ptr<ShmArena>* out);

  // `bytes` of this rank's region (64-byte aligned, committed, zero on first use), or
  // nullptr when they do not fit or /dev/shm cannot back them; then *why (if given) says
  // which, and nothing was taken.
  void* allocate(size_t bytes, Status* why = nullptr);
  // Undoes the latest allocation if `p` is it (its whole pages go back to /dev/shm, the rest
  // is zeroed, so the next allocation starts where `p` did and reads zero). Returns false
  // and does nothing otherwise (only one step of undo is remembered).
  bool release_last(void* p);
  // Forgets every allocation (keeps what is committed; contents are not cleared).
  void reset() {
    used_ = 0;
    last_ = nullptr;
  }
  // Bytes allocate() can still hand out (the next allocation is 64-byte aligned first).
  size_t available() const {
    const size_t at = (used_ + 63) / 64 * 64;
    return at >= bytes_per_rank_ ? 0 : bytes_per_rank_ - at;
  }

  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  size_t bytes_per_rank() const { return bytes_per_rank_; }
  char* region(int rank) const { return base_ + static_cast<size_t>(rank) * bytes_per_rank_; }
  // True when [p, p + bytes) lies in this rank's region.
  bool contains(const void* p, size_t bytes) const;
  // Where [p, p + bytes) lies in this rank's region when it is within what allocate() has
  // handed out; kNone otherwise.
  static constexpr size_t kNone = ~size_t{0};
  size_t offset_of(const void* p, size_t bytes) const;

 private:
  ShmArena() = default;
  SharedMapping mapping_;
  char* base_ = nullptr;
  int local_rank_ = 0;
  int local_size_ = 1;
  size_t bytes_per_rank_ = 0;
  size_t own_offset_ = 0;    // this rank's region, as an offset into the segment
  size_t used_ = 0;
  size_t committed_ = 0;     // this region's bytes backed in /dev/shm, from its start (whole pages)
  char* last_ = nullptr;     // the latest allocation (release_last), and used_ before it
  size_t used_before_last_ = 0;
};

// Makes `arena` the memory behind kolo/memory.h (nullptr withdraws it; `why_none` then
// says why there is none, for allocate_shared's error). Called by ShmExecutor at creation
// and before it destroys its arena. Thread-safe (shm_memory.cc).
void publish_arena(ShmArena* arena, const std::string& why_none = "");

}  // namespace kolo::shm

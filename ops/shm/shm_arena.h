// ops/shm/shm_arena.h — ShmArena: memory that every local rank can read, for zero-copy
// allreduce. A model that keeps its gradients in one contiguous buffer (llm.c style)
// allocates that buffer here; ShmGroup::allreduce_in_arena then reduces straight out of the
// ranks' buffers, with no copy into the engine's slots.
//
// Layout: one segment (created, mapped and unlinked like ShmGroup's) holding one region of
// `bytes_per_rank` per local rank. allocate() hands out this rank's region front to back,
// 64-byte aligned, so ranks that make the same allocations in the same order get the same
// offsets — which is what allreduce_in_arena requires (it checks). Memory is returned all at
// once by reset() or with the arena.
//
// Ownership: create() hands out the only owner; memory from allocate() is valid until
// reset() or destruction. Peers' regions are readable by design: keep only gradients here.
// Thread safety: allocate()/reset() on one thread at a time; the memory itself is ordinary
// memory for the model's threads, but must not be written while an allreduce on it runs.
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

  // `bytes` of this rank's region (64-byte aligned), or nullptr when it does not fit.
  void* allocate(size_t bytes);
  // Forgets every allocation.
  void reset() { used_ = 0; }
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

 private:
  ShmArena() = default;
  SharedMapping mapping_;
  char* base_ = nullptr;
  int local_rank_ = 0;
  int local_size_ = 1;
  size_t bytes_per_rank_ = 0;
  size_t used_ = 0;
};

// Makes `arena` the memory behind kolo/memory.h (nullptr withdraws it). Called by
// ShmExecutor at creation and before it destroys its arena. Thread-safe (shm_memory.cc).
void publish_arena(ShmArena* arena);

}  // namespace kolo::shm

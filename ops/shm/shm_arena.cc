// Shared gradient memory for zero-copy allreduce: ops/shm/shm_arena.h.
#include "ops/shm/shm_arena.h"

#include <cstdint>
#include <cstring>

namespace kolo::shm {
namespace {

constexpr uint64_t kArenaMagic = 0x316172656e61'6b6fULL;  // "koarena1" (LE-ish); any constant
constexpr size_t kHeader = 4096;  // magic + sizes; regions start page-aligned after it

struct ArenaHeader {
  uint64_t magic;
  uint64_t local_size;
  uint64_t bytes_per_rank;
};

}  // namespace

Status ShmArena::create(const Options& o, const Agree& agree, std::unique_ptr<ShmArena>* out) {
  if (o.local_size < 1 || o.local_rank < 0 || o.local_rank >= o.local_size || o.bytes_per_rank == 0) {
    return Status::invalid_argument("shared memory arena: local rank " + std::to_string(o.local_rank) +
                                    " of " + std::to_string(o.local_size) + " with " +
                                    std::to_string(o.bytes_per_rank) + " bytes per rank is invalid");
  }
  std::unique_ptr<ShmArena> a(new ShmArena());
  a->local_rank_ = o.local_rank;
  a->local_size_ = o.local_size;
  a->bytes_per_rank_ = (o.bytes_per_rank + 4095) / 4096 * 4096;
  const size_t total = kHeader + a->bytes_per_rank_ * static_cast<size_t>(o.local_size);
  const auto init = [&](void* base) {
    auto* h = static_cast<ArenaHeader*>(base);
    h->local_size = static_cast<uint64_t>(o.local_size);
    h->bytes_per_rank = a->bytes_per_rank_;
    h->magic = kArenaMagic;
  };
  const auto on_mapped = [&](void* base) -> Status {
    const auto* h = static_cast<const ArenaHeader*>(base);
    if (h->magic != kArenaMagic || h->local_size != static_cast<uint64_t>(o.local_size) ||
        h->bytes_per_rank != a->bytes_per_rank_) {
      return Status::communication("shared memory arena \"" + o.name + "\": ranks disagree on its size");
    }
    a->base_ = static_cast<char*>(base) + kHeader;
    return Status::ok();
  };
  KOLO_RETURN_IF_ERROR(SharedMapping::establish(o.name, total, o.local_rank == 0, agree, init,
                                                on_mapped, &a->mapping_));
  *out = std::move(a);
  return Status::ok();
}

void* ShmArena::allocate(size_t bytes) {
  const size_t at = (used_ + 63) / 64 * 64;
  if (at > bytes_per_rank_ || bytes > bytes_per_rank_ - at) return nullptr;
  used_ = at + bytes;
  return region(local_rank_) + at;
}

bool ShmArena::contains(const void* p, size_t bytes) const {
  const auto* c = static_cast<const char*>(p);
  const char* lo = region(local_rank_);
  return c >= lo && c <= lo + bytes_per_rank_ && bytes <= static_cast<size_t>(lo + bytes_per_rank_ - c);
}

}  // namespace kolo::shm

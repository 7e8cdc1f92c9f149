// Shared gradient memory for zero-copy allreduce: ops/shm/shm_arena.h.
#include "ops/shm/shm_arena.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "ops/shm/shm_regions.h"

namespace kolo::shm {
namespace {

constexpr uint64_t kArenaMagic = 0x316172656e61'6b6fULL;  // "koarena1" (LE-ish); any constant
constexpr size_t kPage = 4096;

}  // namespace

Status ShmArena::create(const Options& o, const Agree& agree, std::unique_ptr<ShmArena>* out) {
  Regions r;
  KOLO_RETURN_IF_ERROR(establish_regions(
      {"shared memory arena", o.name, kArenaMagic, o.local_rank, o.local_size, o.bytes_per_rank}, agree, &r));
  std::unique_ptr<ShmArena> a(new ShmArena());
  a->local_rank_ = o.local_rank;
  a->local_size_ = o.local_size;
  a->bytes_per_rank_ = r.bytes_per_rank;
  a->base_ = r.base;
  a->own_offset_ = r.offset(o.local_rank);
  a->mapping_ = std::move(r.mapping);
  *out = std::move(a);
  return Status::ok();
}

void* ShmArena::allocate(size_t bytes, Status* why) {
  const size_t at = (used_ + 63) / 64 * 64;
  if (at > bytes_per_rank_ || bytes > bytes_per_rank_ - at) {
    if (why != nullptr) {
      *why = Status::invalid_argument("shared memory arena: " + std::to_string(bytes) + " bytes asked, " +
                                      std::to_string(available()) + " of " + std::to_string(bytes_per_rank_) +
                                      " left");
    }
    return nullptr;
  }
  if (at + bytes > committed_) {
    Status s = mapping_.commit(own_offset_ + committed_, at + bytes - committed_);
    if (!s.is_ok()) {
      if (why != nullptr) {
        *why = Status::communication("shared memory arena: " + std::to_string(bytes) + " bytes asked: " + s.message());
      }
      return nullptr;
    }
    committed_ = std::min(bytes_per_rank_, (at + bytes + kPage - 1) / kPage * kPage);
  }
  last_ = region(local_rank_) + at;
  used_before_last_ = used_;
  used_ = at + bytes;
  return last_;
}

bool ShmArena::release_last(void* p) {
  if (p == nullptr || p != last_) return false;
  char* base = region(local_rank_);
  used_ = used_before_last_;
  last_ = nullptr;
  // Whole pages above the new top go back to /dev/shm; the part of a page below it that the
  // released allocation used is zeroed, so memory still reads zero on first use.
  const size_t keep = std::min(committed_, (used_ + kPage - 1) / kPage * kPage);
  if (committed_ > keep && mapping_.decommit(own_offset_ + keep, committed_ - keep).is_ok()) {
    committed_ = keep;
  }
  std::memset(base + used_, 0, committed_ - used_);
  return true;
}

bool ShmArena::contains(const void* p, size_t bytes) const {
  const auto* c = static_cast<const char*>(p);
  const char* lo = region(local_rank_);
  return c >= lo && c <= lo + bytes_per_rank_ && bytes <= static_cast<size_t>(lo + bytes_per_rank_ - c);
}

size_t ShmArena::offset_of(const void* p, size_t bytes) const {
  if (!contains(p, bytes)) return kNone;
  const auto at = static_cast<size_t>(static_cast<const char*>(p) - region(local_rank_));
  return at + bytes <= used_ ? at : kNone;
}

}  // namespace kolo::shm

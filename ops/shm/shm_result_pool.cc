// Shared memory for collective results: ops/shm/shm_result_pool.h.
#include "ops/shm/shm_result_pool.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace kolo::shm {
namespace {

constexpr uint64_t kPoolMagic = 0x316c6f6f70'6b6fULL;  // any constant the ranks compare
constexpr size_t kPage = 4096;
constexpr size_t kHeader = kPage;  // magic + sizes; regions start page-aligned after it

struct PoolHeader {
  uint64_t magic;
  uint64_t local_size;
  uint64_t bytes_per_rank;
};

}  // namespace

Status ShmResultPool::create(const Options& o, const Agree& agree, ShmResultPool** out) {
  if (o.local_size < 1 || o.local_rank < 0 || o.local_rank >= o.local_size || o.bytes_per_rank == 0) {
    return Status::invalid_argument("shared memory result pool: local rank " + std::to_string(o.local_rank) +
                                    " of " + std::to_string(o.local_size) + " with " +
                                    std::to_string(o.bytes_per_rank) + " bytes per rank is invalid");
  }
  auto* p = new ShmResultPool();
  p->bytes_per_rank_ = (o.bytes_per_rank + kPage - 1) / kPage * kPage;
  const size_t total = kHeader + p->bytes_per_rank_ * static_cast<size_t>(o.local_size);
  const auto init = [&](void* base) {
    auto* h = static_cast<PoolHeader*>(base);
    h->local_size = static_cast<uint64_t>(o.local_size);
    h->bytes_per_rank = p->bytes_per_rank_;
    h->magic = kPoolMagic;
  };
  const auto on_mapped = [&](void* base) -> Status {
    const auto* h = static_cast<const PoolHeader*>(base);
    if (h->magic != kPoolMagic || h->local_size != static_cast<uint64_t>(o.local_size) ||
        h->bytes_per_rank != p->bytes_per_rank_) {
      return Status::communication("shared memory result pool \"" + o.name + "\": ranks disagree on its size");
    }
    p->base_ = static_cast<char*>(base) + kHeader;
    return Status::ok();
  };
  Status s = SharedMapping::establish(o.name, total, o.local_rank == 0, agree, init, on_mapped, &p->mapping_,
                                      Commit::kLazy);
  if (!s.is_ok()) {
    delete p;
    return s;
  }
  p->own_offset_ = kHeader + static_cast<size_t>(o.local_rank) * p->bytes_per_rank_;
  p->own_ = p->region(o.local_rank);
  p->free_[0] = p->bytes_per_rank_;
  p->mapped_.store(true, std::memory_order_release);
  if (!kolo::detail::add_tensor_memory_source(p)) {
    p->retire();  // never registered: hands nothing out, and unmaps now (no block is out)
    return Status::internal("shared memory result pool: too many pools were made in this process");
  }
  *out = p;
  return Status::ok();
}

void* ShmResultPool::take(size_t bytes) {
  const size_t want = (bytes + kPage - 1) / kPage * kPage;
  std::lock_guard<std::mutex> lock(mu_);
  if (retired_ || want == 0) return nullptr;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < want) continue;
    const size_t at = it->first;
    if (at + want > committed_) {
      // Commit up to the end of this block; a failure (full /dev/shm) leaves it to the heap.
      if (!mapping_.commit(own_offset_ + committed_, at + want - committed_).is_ok()) return nullptr;
      committed_ = at + want;
    }
    const size_t rest = it->second - want;
    free_.erase(it);
    if (rest > 0) free_[at + want] = rest;
    live_[at] = want;
    return own_ + at;
  }
  return nullptr;
}

bool ShmResultPool::holds(const void* p) const {
  if (!mapped_.load(std::memory_order_acquire)) return false;
  const auto* c = static_cast<const char*>(p);
  return c >= own_ && c < own_ + bytes_per_rank_;
}

void ShmResultPool::give(void* p) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t at = static_cast<size_t>(static_cast<char*>(p) - own_);
  auto live = live_.find(at);
  if (live == live_.end()) return;  // not a block of ours: cannot happen through TensorAllocator
  size_t lo = at, len = live->second;
  live_.erase(live);
  auto next = free_.lower_bound(at);
  if (next != free_.end() && next->first == at + len) {
    len += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == lo) {
      lo = prev->first;
      len += prev->second;
      free_.erase(prev);
    }
  }
  free_[lo] = len;
  unmap_if_done();
}

size_t ShmResultPool::offset_of(const void* p, size_t bytes) const {
  if (!holds(p)) return kNone;
  const size_t at = static_cast<size_t>(static_cast<const char*>(p) - own_);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.upper_bound(at);  // the block after the one containing `at`
  if (it == live_.begin()) return kNone;
  --it;
  const size_t into = at - it->first;
  return into <= it->second && bytes <= it->second - into ? at : kNone;
}

size_t ShmResultPool::live_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

void ShmResultPool::retire() {
  std::lock_guard<std::mutex> lock(mu_);
  retired_ = true;
  unmap_if_done();
}

void ShmResultPool::unmap_if_done() {
  if (!retired_ || !live_.empty() || !mapped_.load(std::memory_order_relaxed)) return;
  mapped_.store(false, std::memory_order_release);
  mapping_ = SharedMapping();
}

}  // namespace kolo::shm

// Shared memory for collective results: ops/shm/shm_result_pool.h.
#include "ops/shm/shm_result_pool.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <utility>

#include "ops/shm/shm_regions.h"

namespace kolo::shm {
namespace {

constexpr uint64_t kPoolMagic = 0x316c6f6f70'6b6fULL;  // any constant the ranks compare
constexpr size_t kPage = 4096;

}  // namespace

Status ShmResultPool::create(const Options& o, const Agree& agree, ShmResultPool** out) {
  Regions r;
  KOLO_RETURN_IF_ERROR(establish_regions(
      {"shared memory result pool", o.name, kPoolMagic, o.local_rank, o.local_size, o.bytes_per_rank}, agree, &r));
  auto* p = new ShmResultPool();
  p->bytes_per_rank_ = r.bytes_per_rank;
  p->base_ = r.base;
  p->own_offset_ = r.offset(o.local_rank);
  p->mapping_ = std::move(r.mapping);
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

size_t ShmResultPool::carve(size_t want) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < want) continue;
    const size_t at = it->first;
    if (at + want > committed_) {
      // Commit up to the end of this block; a failure (full /dev/shm) leaves it to the heap.
      if (!mapping_.commit(own_offset_ + committed_, at + want - committed_).is_ok()) return kNone;
      committed_ = at + want;
    }
    const size_t rest = it->second - want;
    free_.erase(it);
    if (rest > 0) free_[at + want] = rest;
    live_[at] = want;
    return at;
  }
  return kNone;
}

void* ShmResultPool::take(size_t bytes) {
  const size_t want = (bytes + kPage - 1) / kPage * kPage;
  std::lock_guard<std::mutex> lock(mu_);
  if (retired_ || want == 0) return nullptr;
  if (reserved_ != kNone && !reserved_out_ && want <= reserved_bytes_) {
    reserved_out_ = true;
    return own_ + reserved_;
  }
  const size_t at = carve(want);
  return at == kNone ? nullptr : own_ + at;
}

size_t ShmResultPool::reserve(size_t bytes, size_t* room) {
  const size_t want = std::max(kPage, (bytes + kPage - 1) / kPage * kPage);
  std::lock_guard<std::mutex> lock(mu_);
  if (retired_) return kNone;
  if (reserved_ != kNone) {
    if (reserved_out_) return kNone;
    if (reserved_bytes_ < want) {
      release(reserved_);
      reserved_ = kNone;
    }
  }
  if (reserved_ == kNone) {
    const size_t at = carve(want);
    if (at == kNone) return kNone;
    reserved_ = at, reserved_bytes_ = want, reserved_out_ = false;
  }
  if (room != nullptr) *room = reserved_bytes_;
  return reserved_;
}

size_t ShmResultPool::reserved(bool* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (out != nullptr) *out = reserved_out_;
  return reserved_;
}

void ShmResultPool::consume_reserved() {
  std::lock_guard<std::mutex> lock(mu_);
  if (reserved_ != kNone && reserved_out_) reserved_ = kNone, reserved_out_ = false;
}

bool ShmResultPool::holds(const void* p) const {
  if (!mapped_.load(std::memory_order_acquire)) return false;
  const auto* c = static_cast<const char*>(p);
  return c >= own_ && c < own_ + bytes_per_rank_;
}

void ShmResultPool::give(void* p) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t at = static_cast<size_t>(static_cast<char*>(p) - own_);
  if (at == reserved_) {  // back to reserved: a peer may write into it at the next alltoall
    reserved_out_ = false;
    return;
  }
  if (live_.find(at) == live_.end()) return;  // not a block of ours: cannot happen through TensorAllocator
  release(at);
  unmap_if_done();
}

void ShmResultPool::release(size_t at) {
  auto live = live_.find(at);
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
  return live_.size() - (reserved_ != kNone && !reserved_out_ ? 1 : 0);
}

void ShmResultPool::retire() {
  std::lock_guard<std::mutex> lock(mu_);
  retired_ = true;
  if (reserved_ != kNone && !reserved_out_) release(reserved_);
  reserved_ = kNone;  // one that is out is an ordinary block from here on
  reserved_out_ = false;
  unmap_if_done();
}

void ShmResultPool::unmap_if_done() {
  if (!retired_ || !live_.empty() || !mapped_.load(std::memory_order_relaxed)) return;
  mapped_.store(false, std::memory_order_release);
  mapping_ = SharedMapping();
}

}  // namespace kolo::shm

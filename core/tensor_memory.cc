// Tensor memory: operator new for small blocks, and a few large freed blocks kept for reuse
// (kolo/tensor.h, detail::tensor_allocate); other sources of it (core/tensor_memory.h).
#include "core/tensor_memory.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "kolo/tensor.h"

namespace kolo::detail {
namespace {

// Large blocks are rounded up to this, so that sizes that differ a little share blocks.
constexpr size_t kGrain = size_t{64} << 10;

class BlockCache {
 public:
  void* take(size_t bytes) {
    const size_t want = (bytes + kGrain - 1) / kGrain * kGrain;
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t best = kept_.size();
      for (size_t i = 0; i < kept_.size(); ++i)
        if (kept_[i].size >= want && kept_[i].size <= 2 * want && (best == kept_.size() || kept_[i].size < kept_[best].size))
          best = i;
      if (best != kept_.size()) {
        const Block b = kept_[best];
        kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(best));
        kept_bytes_ -= b.size;
        live_[b.data] = b.size;
        return b.data;
      }
    }
    void* p = std::aligned_alloc(64, want);
    if (p == nullptr) throw std::bad_alloc();
    std::lock_guard<std::mutex> lock(mu_);
    live_[p] = want;
    return p;
  }

  void give(void* p) noexcept {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) return;  // not ours: cannot happen through TensorAllocator
    const Block b{p, it->second};
    live_.erase(it);
    std::vector<void*> drop;
    if (b.size <= kKeptBytesMax) {
      // Newest first out: drop the oldest kept blocks to make room.
      while (!kept_.empty() && (kept_.size() >= kKeptBlocks || kept_bytes_ + b.size > kKeptBytesMax)) {
        drop.push_back(kept_.front().data);
        kept_bytes_ -= kept_.front().size;
        kept_.erase(kept_.begin());
      }
      kept_.push_back(b);
      kept_bytes_ += b.size;
    } else {
      drop.push_back(p);
    }
    lock.unlock();
    for (void* d : drop) std::free(d);
  }

  size_t kept_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return kept_bytes_;
  }

 private:
  struct Block {
    void* data;
    size_t size;
  };
  std::mutex mu_;
  std::vector<Block> kept_;                   // guarded by mu_; oldest first
  size_t kept_bytes_ = 0;                     // guarded by mu_
  std::unordered_map<void*, size_t> live_;    // guarded by mu_: large blocks handed out
};

// Never destroyed: tensors may be freed during static destruction.
BlockCache& cache() {
  static BlockCache* c = new BlockCache;
  return *c;
}

// Registered sources: a slot is written once (release) after its index was claimed.
std::atomic<TensorMemorySource*> g_sources[kMaxTensorMemorySources];
std::atomic<int> g_source_count{0};
thread_local TensorMemorySource* t_source = nullptr;

}  // namespace

bool add_tensor_memory_source(TensorMemorySource* source) {
  const int i = g_source_count.fetch_add(1, std::memory_order_acq_rel);
  if (i >= kMaxTensorMemorySources) return false;
  g_sources[i].store(source, std::memory_order_release);
  return true;
}

TensorSourceScope::TensorSourceScope(TensorMemorySource* source) : previous_(t_source) { t_source = source; }
TensorSourceScope::~TensorSourceScope() { t_source = previous_; }

void* tensor_allocate(size_t bytes) {
  if (t_source != nullptr && bytes > 0) {
    if (void* p = t_source->take(bytes)) return p;
  }
  if (bytes < kKeptBlockMin) return ::operator new(bytes == 0 ? 1 : bytes);
  return cache().take(bytes);
}

void tensor_deallocate(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  const int sources = std::min(g_source_count.load(std::memory_order_acquire), kMaxTensorMemorySources);
  for (int i = 0; i < sources; ++i) {
    TensorMemorySource* s = g_sources[i].load(std::memory_order_acquire);
    if (s != nullptr && s->holds(p)) return s->give(p);
  }
  if (bytes < kKeptBlockMin) return ::operator delete(p);
  cache().give(p);
}

size_t tensor_kept_bytes() { return cache().kept_bytes(); }

}  // namespace kolo::detail

// core/tensor_memory.h — memory for tensors from somewhere other than the heap.
//
// kolo/tensor.h's detail::tensor_allocate serves Tensor::bytes from the heap (and a few
// kept large blocks). An executor may instead want a result to land in memory its local
// peers can write into (ops/shm/shm_result_pool.h: a peer then copies its block straight
// into this rank's result, once). It registers a TensorMemorySource, and allocates the
// result with a TensorSourceScope open: tensor_allocate on that thread asks the source
// first (and falls back to the heap when it has no room). Whatever thread later frees the
// Tensor, tensor_deallocate hands the block back to the source that holds it — also after
// kolo shut down, which is why a source is never unregistered (it must stay valid as long
// as any of its blocks lives; ShmResultPool keeps itself alive for that).
// Thread safety: registration, take/give and scopes may run on any threads.
#pragma once

#include <cstddef>

namespace kolo::detail {

class TensorMemorySource {
 public:
  // `bytes` of memory, or nullptr when this source cannot give them (the heap serves then).
  virtual void* take(size_t bytes) = 0;
  // Whether `p` is a block take() handed out and give() did not yet take back. Must be
  // cheap: every tensor_deallocate asks every registered source.
  virtual bool holds(const void* p) const = 0;
  // Takes back a block that holds() answered true for.
  virtual void give(void* p) noexcept = 0;

 protected:
  ~TensorMemorySource() = default;
};

// At most this many sources are ever registered in one process.
inline constexpr int kMaxTensorMemorySources = 64;

// Registers `source` for good (tensor_deallocate asks it from now on). False when
// kMaxTensorMemorySources are registered already: then the source must not hand out memory.
bool add_tensor_memory_source(TensorMemorySource* source);

// While it lives, tensor_allocate on this thread asks `source` (may be null: none) first.
class TensorSourceScope {
 public:
  explicit TensorSourceScope(TensorMemorySource* source);
  ~TensorSourceScope();
  TensorSourceScope(const TensorSourceScope&) = delete;
  TensorSourceScope& operator=(const TensorSourceScope&) = delete;

 private:
  TensorMemorySource* previous_;
};

}  // namespace kolo::detail

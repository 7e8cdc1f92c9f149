// ops/gpu/buffers.h — growable device and pinned-host buffers for the GPU executors (the
// fusion buffer, copy descriptors, host staging).
//
// reserve() only grows: it frees the old block and allocates the new size, without keeping
// the contents (callers refill it for every collective). Device buffers allocate on the
// calling thread's current device; callers reserve only after work on the old block has
// finished (the executors synchronize their stream at the end of every collective).
// Pinned buffers are portable (usable with every device's streams).
//
// Ownership: each buffer owns its block and frees it in the destructor (errors at exit are
// ignored: the process may be tearing CUDA down). Thread safety: not thread-safe; the
// executors use them on the coordinator thread only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "ops/gpu/cuda_check.h"

namespace kolo::ops::gpu {

// How each kind of buffer allocates and frees.
struct DeviceMemory {
  static constexpr const char* kAllocCall = "cudaMalloc";
  static cudaError_t allocate(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
  static void release(void* p) { cudaFree(p); }
};
struct PinnedMemory {
  static constexpr const char* kAllocCall = "cudaHostAlloc(cudaHostAllocPortable)";
  static cudaError_t allocate(void** p, size_t bytes) { return cudaHostAlloc(p, bytes, cudaHostAllocPortable); }
  static void release(void* p) { cudaFreeHost(p); }
};

template <class Memory>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  ~CudaBuffer() {
    if (data_) Memory::release(data_);
  }

  Status reserve(size_t bytes) {
    if (bytes <= capacity_) return Status::ok();
    if (data_) Memory::release(data_);
    data_ = nullptr;
    capacity_ = 0;
    KOLO_RETURN_IF_ERROR(cuda_status(Memory::allocate(&data_, bytes), Memory::kAllocCall, __FILE__, __LINE__));
    capacity_ = bytes;
    return Status::ok();
  }
  void* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

using DeviceBuffer = CudaBuffer<DeviceMemory>;
using PinnedBuffer = CudaBuffer<PinnedMemory>;

}  // namespace kolo::ops::gpu

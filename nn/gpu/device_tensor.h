// nn/gpu/device_tensor.h — the GPU trainer's activation tensor: contiguous fp32 in device
// memory, NCHW (or [N, features]), the device twin of nn::Tensor.
//
// resize() keeps the allocation when the element count does not grow, so layers that
// resize their outputs every batch allocate only on the first one (or when the batch
// grows). Copies to and from the host are ordered on the given stream and both return
// only after their copy has finished (pageable host memory; the trainer's copies per
// batch are small next to its compute).
//
// Ownership: owns its device block (freed in the destructor; cudaFree waits for the
// device, so a block still in use by enqueued work is never freed under it).
// Thread safety: a plain value; no internal synchronization.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "nn/tensor.h"

namespace kolo::nn::gpu {

class DeviceTensor {
 public:
  DeviceTensor() = default;
  explicit DeviceTensor(Dims shape) { resize(std::move(shape)); }
  ~DeviceTensor();
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  DeviceTensor(DeviceTensor&& o) noexcept;
  DeviceTensor& operator=(DeviceTensor&& o) noexcept;

  // Sets the shape on the current device; contents are unspecified afterwards.
  void resize(Dims shape);
  // Zeroes the contents, ordered on `stream`.
  void zero(cudaStream_t stream);

  const Dims& shape() const { return shape_; }
  int dim(size_t i) const { return shape_.at(i); }
  size_t rank() const { return shape_.size(); }
  int64_t size() const { return size_; }
  float* data() { return data_; }
  const float* data() const { return data_; }

  // Takes the shape of `host` and copies its values. Synchronous with respect to the host
  // memory: returns once `host` may be changed (the copy itself is ordered on `stream`).
  void upload(const Tensor& host, cudaStream_t stream);
  // Copies to `host` (resized to this shape) and waits for the copy.
  void download(Tensor& host, cudaStream_t stream) const;

 private:
  Dims shape_;
  int64_t size_ = 0;
  int64_t capacity_ = 0;
  float* data_ = nullptr;
};

}  // namespace kolo::nn::gpu

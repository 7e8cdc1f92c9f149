// nn/gpu/device_params.h — a model's parameters on the GPU: the host ParamStore's layout
// (names, shapes, offsets: the same as the CPU model's) with one contiguous device buffer
// for all values and, when it has gradients, one for all gradients.
//
// Why one buffer each, as on the CPU: the optimizer updates everything in one kernel, the
// whole store moves to and from the host in one copy, and each parameter's gradient is a
// slice (a device TensorView) that DistributedOptimizer-style code allreduces on its own.
//
// Life cycle: layers register tensors in host() while the model is built; finalize()
// finalizes the host store and allocates the device buffers (zeroed). Device pointers stay
// valid until the object is destroyed.
// Ownership: owns both device buffers and the host store. Thread safety: none.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "nn/params.h"

namespace kolo::nn::gpu {

class DeviceParams {
 public:
  explicit DeviceParams(bool with_grads = true) : host_(with_grads), with_grads_(with_grads) {}
  ~DeviceParams();
  DeviceParams(const DeviceParams&) = delete;
  DeviceParams& operator=(const DeviceParams&) = delete;

  // The layout, and a host copy of the values (filled only by download_values()).
  ParamStore& host() { return host_; }
  const ParamStore& host() const { return host_; }
  void finalize();

  size_t total_size() const { return host_.total_size(); }
  float* values() { return values_; }
  float* grads() { return grads_; }
  float* value(int i) { return values_ + host_.info(i).offset; }
  float* grad(int i) { return grads_ + host_.info(i).offset; }

  // Values from/to a host buffer of total_size() floats (e.g. a CPU model's store with
  // the same layout); both return after the copy finished.
  void upload_values(const float* src, cudaStream_t stream);
  void download_values(float* dst, cudaStream_t stream) const;
  void zero_grads(cudaStream_t stream);

 private:
  ParamStore host_;
  bool with_grads_;
  float* values_ = nullptr;
  float* grads_ = nullptr;
};

}  // namespace kolo::nn::gpu

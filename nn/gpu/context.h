// nn/gpu/context.h — what every GPU layer of the trainer shares: the device, one stream,
// the cuDNN and cuBLAS handles bound to that stream, and one cuDNN workspace.
//
// All of a model's GPU work is ordered on this one stream, so layers may share scratch
// memory (the workspace) without further synchronization. Errors of CUDA, cuDNN and cuBLAS
// become std::runtime_error naming the call, file:line and the library's text (the trainer
// reports errors by exception, like the CPU layers); KOLO_NN_CUDA / KOLO_NN_CUDNN /
// KOLO_NN_CUBLAS wrap every call.
//
// Ownership: the context owns the stream, handles and workspace; a GpuModel owns its
// context, layers borrow it. Thread safety: none; the training thread uses it.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>

namespace kolo::nn::gpu {

[[noreturn]] void throw_cuda(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn(cudnnStatus_t s, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line);

// CUDA devices this process can use (0 without a driver or a device; never throws).
int visible_gpus();

class GpuContext {
 public:
  // Selects `device` (cudaSetDevice) and creates the stream and handles on it.
  explicit GpuContext(int device);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  // At least `bytes` of device scratch, valid until the next workspace() call with more
  // bytes (which reallocates after synchronizing the stream). Returns nullptr for 0 bytes.
  void* workspace(size_t bytes);
  // Waits until all work enqueued on the stream has finished.
  void synchronize();

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

}  // namespace kolo::nn::gpu

#define KOLO_NN_CUDA(expr)                                                                         \
  do {                                                                                             \
    const cudaError_t kolo_e_ = (expr);                                                            \
    if (kolo_e_ != cudaSuccess) ::kolo::nn::gpu::throw_cuda(kolo_e_, #expr, __FILE__, __LINE__);   \
  } while (0)
#define KOLO_NN_CUDNN(expr)                                                                        \
  do {                                                                                             \
    const cudnnStatus_t kolo_s_ = (expr);                                                          \
    if (kolo_s_ != CUDNN_STATUS_SUCCESS) ::kolo::nn::gpu::throw_cudnn(kolo_s_, #expr, __FILE__, __LINE__); \
  } while (0)
#define KOLO_NN_CUBLAS(expr)                                                                       \
  do {                                                                                             \
    const cublasStatus_t kolo_s_ = (expr);                                                         \
    if (kolo_s_ != CUBLAS_STATUS_SUCCESS) ::kolo::nn::gpu::throw_cublas(kolo_s_, #expr, __FILE__, __LINE__); \
  } while (0)

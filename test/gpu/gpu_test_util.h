// Helpers for kolo's GPU tests: whether a GPU is here (tests skip with kSkipExitCode when
// not), checked CUDA calls, and device buffers that free themselves.
#pragma once

#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <vector>

namespace kolo::test {

// CTest's SKIP_RETURN_CODE for the GPU tests (automake's "skipped").
inline constexpr int kSkipExitCode = 77;

// CUDA devices this process can use; 0 when there is no driver or no device.
inline int visible_gpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

#define CUDA_REQUIRE(expr)                                                            \
  do {                                                                                \
    const cudaError_t _e = (expr);                                                    \
    INFO(#expr << ": " << cudaGetErrorName(_e) << ": " << cudaGetErrorString(_e));    \
    REQUIRE(_e == cudaSuccess);                                                       \
  } while (0)

// `bytes` of device memory on the current device.
class DeviceMem {
 public:
  explicit DeviceMem(size_t bytes) : bytes_(bytes) { CUDA_REQUIRE(cudaMalloc(&p_, bytes == 0 ? 1 : bytes)); }
  ~DeviceMem() { cudaFree(p_); }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  std::byte* get() const { return static_cast<std::byte*>(p_); }
  size_t bytes() const { return bytes_; }
  // cudaMemcpy from pageable memory may return before its DMA has landed, and kolo's
  // executors read on non-blocking streams that do not wait for the legacy stream: sync.
  void upload(const void* host) {
    CUDA_REQUIRE(cudaMemcpy(p_, host, bytes_, cudaMemcpyHostToDevice));
    CUDA_REQUIRE(cudaDeviceSynchronize());
  }
  void download(void* host) const { CUDA_REQUIRE(cudaMemcpy(host, p_, bytes_, cudaMemcpyDeviceToHost)); }
  std::vector<std::byte> download() const {
    std::vector<std::byte> v(bytes_);
    download(v.data());
    return v;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_;
};

}  // namespace kolo::test

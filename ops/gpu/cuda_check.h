// ops/gpu/cuda_check.h — turns CUDA runtime and NCCL result codes into kolo::Status.
//
// Every CUDA/NCCL call in ops/gpu goes through KOLO_CUDA_RETURN / KOLO_NCCL_RETURN, which
// return early from the enclosing function with a Status naming the call, the file:line and
// the library's own error text, e.g.
//   cudaMemcpyAsync(...) failed at ops/gpu/nccl_executor.cc:212: an illegal memory access...
// so an error from the coordinator thread carries a cheap backtrace to the user's handle.
// Failures of the GPU libraries are reported as Status::Code::kCommunication (the transport
// failed), like MPI's.
//
// Thread safety: pure functions.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>
#include <string_view>

#include "kolo/status.h"

namespace kolo::ops::gpu {

// "ops/gpu/x.cc" from a compiler's __FILE__ (which may be absolute).
inline const char* short_file(const char* path) {
  std::string_view p(path);
  const size_t at = p.rfind("ops/gpu/");
  return at == std::string_view::npos ? path : path + at;
}

inline Status cuda_status(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return Status::ok();
  return Status::communication(std::string(call) + " failed at " + short_file(file) + ":" + std::to_string(line) +
                               ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

inline Status nccl_status(ncclResult_t r, const char* call, const char* file, int line) {
  if (r == ncclSuccess) return Status::ok();
  return Status::communication(std::string(call) + " failed at " + short_file(file) + ":" + std::to_string(line) +
                               ": " + ncclGetErrorString(r));
}

}  // namespace kolo::ops::gpu

#define KOLO_CUDA_STATUS(expr) ::kolo::ops::gpu::cuda_status((expr), #expr, __FILE__, __LINE__)
#define KOLO_NCCL_STATUS(expr) ::kolo::ops::gpu::nccl_status((expr), #expr, __FILE__, __LINE__)
#define KOLO_CUDA_RETURN(expr) KOLO_RETURN_IF_ERROR(KOLO_CUDA_STATUS(expr))
#define KOLO_NCCL_RETURN(expr) KOLO_RETURN_IF_ERROR(KOLO_NCCL_STATUS(expr))

// GpuContext: stream, cuDNN/cuBLAS handles, shared workspace; error conversion.
#include "nn/gpu/context.h"

#include <stdexcept>
#include <string>
#include <string_view>

namespace kolo::nn::gpu {
namespace {

std::string where(const char* call, const char* file, int line) {
  std::string_view f(file);
  const size_t at = f.rfind("nn/gpu/");
  if (at != std::string_view::npos) f = f.substr(at);
  return std::string(call) + " failed at " + std::string(f) + ":" + std::to_string(line) + ": ";
}

}  // namespace

void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  throw std::runtime_error(where(call, file, line) + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

void throw_cudnn(cudnnStatus_t s, const char* call, const char* file, int line) {
  throw std::runtime_error(where(call, file, line) + cudnnGetErrorString(s));
}

void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  throw std::runtime_error(where(call, file, line) + "cuBLAS status " + std::to_string(static_cast<int>(s)));
}

int visible_gpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear it, so later calls report their own errors
    return 0;
  }
  return n;
}

GpuContext::GpuContext(int device) : device_(device) {
  KOLO_NN_CUDA(cudaSetDevice(device));
  KOLO_NN_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  KOLO_NN_CUDNN(cudnnCreate(&cudnn_));
  KOLO_NN_CUDNN(cudnnSetStream(cudnn_, stream_));
  KOLO_NN_CUBLAS(cublasCreate(&cublas_));
  KOLO_NN_CUBLAS(cublasSetStream(cublas_, stream_));
}

GpuContext::~GpuContext() {
  // Errors at teardown are ignored: the process may be shutting CUDA down.
  if (stream_) cudaStreamSynchronize(stream_);
  if (workspace_) cudaFree(workspace_);
  if (cublas_) cublasDestroy(cublas_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (stream_) cudaStreamDestroy(stream_);
}

void* GpuContext::workspace(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes > workspace_bytes_) {
    synchronize();  // the old block may still be in use by enqueued work
    if (workspace_) KOLO_NN_CUDA(cudaFree(workspace_));
    workspace_ = nullptr;
    workspace_bytes_ = 0;
    KOLO_NN_CUDA(cudaMalloc(&workspace_, bytes));
    workspace_bytes_ = bytes;
  }
  return workspace_;
}

void GpuContext::synchronize() { KOLO_NN_CUDA(cudaStreamSynchronize(stream_)); }

}  // namespace kolo::nn::gpu

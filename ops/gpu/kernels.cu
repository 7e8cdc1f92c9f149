// CUDA kernels of the GPU path (see ops/gpu/kernels.h). One .cu file on purpose: nvcc is
// the slowest step of kolo's build, and these kernels are small.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>

#include "ops/gpu/kernels.h"

namespace kolo::ops::gpu {
namespace {

constexpr int kThreads = 256;
// Elementwise kernels use grid-stride loops; more blocks than this adds nothing but
// scheduling (an H100 holds 132 SMs x 8 such blocks at once).
constexpr size_t kMaxElementwiseBlocks = 8192;

// --- batched copy -------------------------------------------------------------------------

// The descriptor owning `chunk`: the last one whose first_chunk <= chunk. Descriptors of
// zero bytes share first_chunk with their successor, so they are never the last such one.
__device__ int find_desc(const CopyDesc* d, int n, uint64_t chunk) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (d[mid].first_chunk <= chunk) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Copies `len` bytes with words of type W (both pointers W-aligned), then the tail bytes.
// Four independent loads per thread before the stores keep enough memory traffic in flight.
template <class W>
__device__ void copy_words(const char* src, char* dst, uint64_t len) {
  const W* s = reinterpret_cast<const W*>(src);
  W* d = reinterpret_cast<W*>(dst);
  const uint64_t words = len / sizeof(W);
  constexpr int kUnroll = 4;
  uint64_t i = threadIdx.x;
  for (; i + (kUnroll - 1) * blockDim.x < words; i += kUnroll * blockDim.x) {
    W v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = s[i + u * blockDim.x];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) d[i + u * blockDim.x] = v[u];
  }
  for (; i < words; i += blockDim.x) d[i] = s[i];
  for (uint64_t b = words * sizeof(W) + threadIdx.x; b < len; b += blockDim.x) dst[b] = src[b];
}

__global__ void batched_copy_kernel(const CopyDesc* descs, int count) {
  const uint64_t chunk = blockIdx.x;
  const CopyDesc& c = descs[find_desc(descs, count, chunk)];
  const uint64_t off = (chunk - c.first_chunk) * kCopyChunkBytes;
  const uint64_t len = min(kCopyChunkBytes, c.bytes - off);
  const char* src = static_cast<const char*>(c.src) + off;
  char* dst = static_cast<char*>(c.dst) + off;
  // Chunk offsets are multiples of 64 KiB, so every chunk of a tensor has the alignment of
  // its start; user views into larger allocations are often only element-aligned.
  const auto a = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst);
  if ((a & 15) == 0) copy_words<uint4>(src, dst, len);
  else if ((a & 7) == 0) copy_words<uint2>(src, dst, len);
  else if ((a & 3) == 0) copy_words<uint32_t>(src, dst, len);
  else if ((a & 1) == 0) copy_words<uint16_t>(src, dst, len);
  else copy_words<uint8_t>(src, dst, len);
}

// --- element-wise -------------------------------------------------------------------------

struct HalfBits {
  static __device__ float load(uint16_t b) { return __half2float(__ushort_as_half(b)); }
  static __device__ uint16_t store(float f) { return __half_as_ushort(__float2half_rn(f)); }
};
struct Bf16Bits {
  static __device__ float load(uint16_t b) { return __bfloat162float(__ushort_as_bfloat16(b)); }
  static __device__ uint16_t store(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
};

template <class Fn>
__global__ void elementwise_kernel(size_t n, Fn fn) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) fn(i);
}

template <class Fn>
cudaError_t launch_elementwise(size_t n, cudaStream_t stream, Fn fn) {
  if (n == 0) return cudaSuccess;
  const size_t blocks = std::min(kMaxElementwiseBlocks, (n + kThreads - 1) / kThreads);
  elementwise_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(n, fn);
  return cudaGetLastError();
}

// Mirrors kernels/cpu_reduce.cc scale_copy: floats scale by (float)f, double by f, integers in
// double truncated toward zero.
template <class T>
cudaError_t scale_int(void* buf, size_t n, double f, cudaStream_t s) {
  T* p = static_cast<T*>(buf);
  return launch_elementwise(n, s, [=] __device__(size_t i) { p[i] = static_cast<T>(trunc(static_cast<double>(p[i]) * f)); });
}

template <class Bits>
cudaError_t scale_16(void* buf, size_t n, float f, cudaStream_t s) {
  uint16_t* p = static_cast<uint16_t*>(buf);
  return launch_elementwise(n, s, [=] __device__(size_t i) { p[i] = Bits::store(Bits::load(p[i]) * f); });
}

template <class T>
cudaError_t divide_int(void* buf, size_t n, int d, cudaStream_t s) {
  T* p = static_cast<T*>(buf);
  // In 64 bits: d may not fit T (uint8 and 256 ranks).
  return launch_elementwise(n, s, [=] __device__(size_t i) { p[i] = static_cast<T>(static_cast<long long>(p[i]) / d); });
}

}  // namespace

uint64_t plan_batched_copy(std::vector<CopyDesc>& descs) {
  uint64_t next = 0;
  for (CopyDesc& d : descs) {
    d.first_chunk = next;
    next += (d.bytes + kCopyChunkBytes - 1) / kCopyChunkBytes;
  }
  return next;
}

cudaError_t launch_batched_copy(const CopyDesc* descs, int count, uint64_t total_chunks, cudaStream_t stream) {
  if (count <= 0 || total_chunks == 0) return cudaSuccess;
  if (total_chunks > 0x7fffffffu) return cudaErrorInvalidValue;  // > 128 TiB: not a real request
  batched_copy_kernel<<<static_cast<unsigned>(total_chunks), kThreads, 0, stream>>>(descs, count);
  return cudaGetLastError();
}

cudaError_t launch_scale(void* buf, size_t n, DType t, double f, cudaStream_t s) {
  if (f == 1.0 || n == 0) return cudaSuccess;
  switch (t) {
    case DType::kUInt8: return scale_int<uint8_t>(buf, n, f, s);
    case DType::kInt32: return scale_int<int32_t>(buf, n, f, s);
    case DType::kInt64: return scale_int<int64_t>(buf, n, f, s);
    case DType::kInt8: return scale_int<int8_t>(buf, n, f, s);
    case DType::kInt16: return scale_int<int16_t>(buf, n, f, s);
    case DType::kBool: break;  // scaled bools are refused at submission
    case DType::kFloat16: return scale_16<HalfBits>(buf, n, static_cast<float>(f), s);
    case DType::kBFloat16: return scale_16<Bf16Bits>(buf, n, static_cast<float>(f), s);
    case DType::kFloat32: {
      float* p = static_cast<float*>(buf);
      const float ff = static_cast<float>(f);
      return launch_elementwise(n, s, [=] __device__(size_t i) { p[i] = p[i] * ff; });
    }
    case DType::kFloat64: {
      double* p = static_cast<double*>(buf);
      return launch_elementwise(n, s, [=] __device__(size_t i) { p[i] = p[i] * f; });
    }
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_postscale(void* buf, size_t n, DType t, ReduceOp op, int num_ranks, double postscale,
                             cudaStream_t s) {
  const bool average = op == ReduceOp::kAverage && num_ranks != 1;
  if (is_floating(t)) return launch_scale(buf, n, t, average ? postscale / num_ranks : postscale, s);
  if (average && n > 0) {
    cudaError_t e = cudaErrorInvalidValue;
    switch (t) {
      case DType::kUInt8: e = divide_int<uint8_t>(buf, n, num_ranks, s); break;
      case DType::kInt32: e = divide_int<int32_t>(buf, n, num_ranks, s); break;
      case DType::kInt64: e = divide_int<int64_t>(buf, n, num_ranks, s); break;
      case DType::kInt8: e = divide_int<int8_t>(buf, n, num_ranks, s); break;
      case DType::kInt16: e = divide_int<int16_t>(buf, n, num_ranks, s); break;
      default: break;  // kBool: Average is refused at submission
    }
    if (e != cudaSuccess) return e;
  }
  return launch_scale(buf, n, t, postscale, s);
}

cudaError_t launch_float_to_half(const float* src, uint16_t* dst, size_t n, cudaStream_t s) {
  return launch_elementwise(n, s, [=] __device__(size_t i) { dst[i] = HalfBits::store(src[i]); });
}
cudaError_t launch_half_to_float(const uint16_t* src, float* dst, size_t n, cudaStream_t s) {
  return launch_elementwise(n, s, [=] __device__(size_t i) { dst[i] = HalfBits::load(src[i]); });
}
cudaError_t launch_float_to_bf16(const float* src, uint16_t* dst, size_t n, cudaStream_t s) {
  return launch_elementwise(n, s, [=] __device__(size_t i) { dst[i] = Bf16Bits::store(src[i]); });
}
cudaError_t launch_bf16_to_float(const uint16_t* src, float* dst, size_t n, cudaStream_t s) {
  return launch_elementwise(n, s, [=] __device__(size_t i) { dst[i] = Bf16Bits::load(src[i]); });
}

}  // namespace kolo::ops::gpu

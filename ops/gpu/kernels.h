// ops/gpu/kernels.h — the CUDA kernels of kolo's GPU path, behind plain host functions:
// batched copy (the fusion pack/unpack of many tensors in ONE launch), scaling (prescale,
// and the postscale/average step of allreduce), and fp16/bf16 <-> fp32 casts.
//
// Each launcher enqueues its work on `stream` and returns the launch's cudaError_t (it never
// synchronizes). Numerics match the CPU reference in kernels/cpu_reduce.h exactly: 16-bit floats
// are widened to float, scaled by (float)factor and rounded to nearest even; integers are
// scaled in double and truncated toward zero; integer averages divide and truncate.
//
// Ownership: all pointers are caller-owned device memory (descriptors included).
// Thread safety: launchers may be called from any thread; ordering is the stream's.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kolo/types.h"

namespace kolo::ops::gpu {

// One copy of a batched copy: `bytes` from `src` to `dst` (device pointers of the current
// device, or peer-accessible ones). `first_chunk` is filled by plan_batched_copy.
struct CopyDesc {
  const void* src = nullptr;
  void* dst = nullptr;
  uint64_t bytes = 0;
  uint64_t first_chunk = 0;
};

// Each thread block of the batched copy moves one chunk of this many bytes, so one launch
// balances a mix of tiny and huge tensors over the whole GPU.
inline constexpr uint64_t kCopyChunkBytes = 64 * 1024;

// Numbers descs[i].first_chunk (a prefix sum of chunk counts) and returns the total number
// of chunks, i.e. the grid size the launch needs.
uint64_t plan_batched_copy(std::vector<CopyDesc>& descs);

// Copies every descriptor of the device array `descs` (already planned, `count` entries,
// `total_chunks` from plan_batched_copy) in one kernel launch. Ranges must not overlap.
cudaError_t launch_batched_copy(const CopyDesc* descs, int count, uint64_t total_chunks, cudaStream_t stream);

// buf[i] = buf[i] * factor for `count` elements of `dtype` (the CPU's scale_copy in place).
// Enqueues nothing when factor == 1.
cudaError_t launch_scale(void* buf, size_t count, DType dtype, double factor, cudaStream_t stream);

// The last step of an allreduce, in place (the CPU's apply_postscale): for kAverage divide
// by `num_ranks`, then multiply by `postscale`. Enqueues nothing when nothing changes.
cudaError_t launch_postscale(void* buf, size_t count, DType dtype, ReduceOp op, int num_ranks, double postscale,
                             cudaStream_t stream);

// Element conversions (round to nearest even), dst and src of `count` elements.
cudaError_t launch_float_to_half(const float* src, uint16_t* dst, size_t count, cudaStream_t stream);
cudaError_t launch_half_to_float(const uint16_t* src, float* dst, size_t count, cudaStream_t stream);
cudaError_t launch_float_to_bf16(const float* src, uint16_t* dst, size_t count, cudaStream_t stream);
cudaError_t launch_bf16_to_float(const uint16_t* src, float* dst, size_t count, cudaStream_t stream);

}  // namespace kolo::ops::gpu

// ops/shm/shm_kernels.h — the N-way reduction kernel of the shared-memory engine.
//
// A rank that owns a slice combines that slice from every local rank in one fixed order —
// rank 0's values first, then rank 1's, ... — so every rank computes bitwise the same result
// and the small-message path (every rank reduces everything) agrees bitwise with the
// reduce-scatter path (each rank reduces its slice).
//
// Integers, fp32 and fp64: the result is exactly that of folding ops::reduce_pair from the
// left over the prescaled sources (ops::scale_copy); fp32/fp64 sums take an AVX2 path that
// does the same multiplications and additions in the same order, selected at run time.
// fp16/bf16: every source is widened to float32 (times the prescale, in float32), combined
// in float32 in the same order, multiplied by the post factor and rounded to 16 bits once
// (kernels/cpu_reduce.h); sums run in registers (F16C/AVX2), other ops a block at a time.
// Thread safety: pure functions on caller-owned memory.
#pragma once

#include <cstddef>

#include "kolo/types.h"

namespace kolo::shm {

// The last step of an allreduce, folded into the reduction: the reduced values are
// finished as ops::apply_postscale(op, ranks, postscale) would finish them (kAverage divides
// by `ranks`), bitwise alike, before they are stored.
struct PostScale {
  bool on = false;
  int ranks = 1;
  double postscale = 1.0;
};

// dst[i] = post(((pre(srcs[0][i]) op pre(srcs[1][i])) op ...) op pre(srcs[n-1][i])),
// i < count, where pre multiplies by `prescale` (as above) and post finishes like
// ops::apply_postscale. n == 1 is allowed (the scales alone).
// When `dst2` is given the result is stored there too (the engine writes its slice to the
// shared slot and to the user's buffer in one pass). The post-scale costs no extra pass for
// fp32/fp64 sums and averages (the common case: gradients); other types take a second pass
// over dst while it is still in cache.
// REQUIRES: n >= 1; dst may alias srcs[0] or srcs[1] but no later source (any source when
// reduce_in_place_any(dtype, op)); dst2 may alias any source but not dst.
void reduce_sources(void* dst, const void* const* srcs, int n, size_t count, DType dtype,
                    ReduceOp op, void* dst2 = nullptr, PostScale post = {}, double prescale = 1.0);

// fp16/bf16 sources, float32 result: dst[i] = ((pre(srcs[0][i]) op pre(srcs[1][i])) op ...),
// every source widened to float32 (times `prescale`, in float32) and combined in float32 in
// source order -- reduce_sources' fp16/bf16 arithmetic without the post factor and the
// rounding, for callers that combine further in float32 and round once at the end (the
// sliced allreduce across hosts). REQUIRES: n >= 1; dst overlaps no source.
void reduce_half_to_float(float* dst, const void* const* srcs, int n, size_t count, DType dtype, ReduceOp op,
                          double prescale);

// True when reduce_sources may write over any of its sources (the wide fp32/fp64 sum and
// every fp16/bf16 reduction read every source of an element before storing that element).
bool reduce_in_place_any(DType dtype, ReduceOp op);

// memcpy for the engine's copies between shared and private memory (non-overlapping).
// glibc copies 2 KiB .. L2-sized blocks with `rep movsb`, which on AMD EPYC (measured on this
// project's VMs) runs 5-10x slower than a vector loop when the source lines were just
// written by another core — exactly the engine's case (a peer's slot, a peer's result). A
// fused response of 1,000 tensors of 4 KB is 1,000 such copies. This copies with vector
// loads and stores below 1 MiB and leaves larger copies to memcpy (which does not use
// `rep movsb` there and switches to non-temporal stores for very large ones). With 0 bytes
// it touches neither pointer (either may be null).
void copy_bytes(void* dst, const void* src, size_t bytes);

// copy_bytes with ops::scale_copy's multiplication by `f` (f == 1: a plain copy).
void scale_copy(void* dst, const void* src, size_t count, DType dtype, double f);

// True when the running CPU takes the AVX2 path (for the benchmark's report).
bool reduce_uses_avx2();

}  // namespace kolo::shm

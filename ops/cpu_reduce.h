// ops/cpu_reduce.h — element-wise reduction and scaling kernels for CPU buffers, used by
// every CPU executor (MPI user-defined ops, the fusion copy-in/out, shared memory).
//
// 16-bit floats are widened to float32, combined, and rounded back (round to nearest even),
// so a sum of two fp16 values is exact up to one final rounding.
// Thread safety: pure functions on caller-owned memory.
#pragma once

#include <cstddef>

#include "kolo/types.h"

namespace kolo::ops {

// dst[i] = dst[i] (op) src[i], for i < count. kAverage combines like kSum (the division by
// the number of ranks happens in apply_postscale).
void reduce_into(void* dst, const void* src, size_t count, DType dtype, ReduceOp op);

// dst[i] = a[i] (op) b[i]. dst may alias a or b.
void reduce_pair(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op);

// dst[i] = src[i] * factor (a plain copy when factor == 1). dst may equal src. For integer
// types the product is computed in double and truncated toward zero.
void scale_copy(void* dst, const void* src, size_t count, DType dtype, double factor);

// The last step of an allreduce, in place: for kAverage divide by `num_ranks` (floats:
// multiply by 1/num_ranks; integers: divide, truncating toward zero), then multiply by
// `postscale`. Does nothing when there is nothing to do.
void apply_postscale(void* buf, size_t count, DType dtype, ReduceOp op, int num_ranks,
                     double postscale);

// dst[i] = the identity of `op` in `dtype` (what combining with leaves a value unchanged):
// 0 for sum/average, 1 for product, the largest value (+inf for floats) for min, the
// lowest (-inf for floats) for max. What a rank that has joined (kolo::join()) contributes.
void fill_identity(void* dst, size_t count, DType dtype, ReduceOp op);

// True when apply_postscale would change values.
bool needs_postscale(ReduceOp op, int num_ranks, double postscale);

}  // namespace kolo::ops

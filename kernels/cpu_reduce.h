// kernels/cpu_reduce.h — element-wise reduction and scaling kernels for CPU buffers, used by
// every CPU executor (MPI user-defined ops, the fusion copy-in/out, shared memory) and by
// core/ (a joined rank's identity stand-in, the average over the ranks that contributed).
// kernels/ sits below core/ and ops/, so both may include it; it includes only kolo/types.h.
//
// 16-bit floats (fp16, bf16): reduce_pair widens both operands to float32, combines and
// rounds back. A collective over several ranks must not do that at every combine (each
// rounding loses up to half an ulp, and an fp16 sum can overflow before the average brings
// it back into range); the executors use the float32 pipeline below instead: widen each
// rank's values (times the prescale) to float32, combine in float32, multiply by the folded
// post factor, and round to 16 bits once (docs/runtime.md, "16-bit floats").
// Thread safety: pure functions on caller-owned memory.
#pragma once

#include <cstddef>

#include "kolo/types.h"

namespace kolo::kernels {

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

// True for the 16-bit floating types (fp16, bf16), which are reduced in float32.
inline bool is_half_float(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

// The factor the last step multiplies a floating-point result by: postscale, divided by
// num_ranks for kAverage (computed in double, as apply_postscale does). 1 when
// !needs_postscale(op, num_ranks, postscale).
double post_factor(ReduceOp op, int num_ranks, double postscale);

// dst[i] = float(src[i]) * prescale (the product rounded to float32; no multiplication when
// prescale == 1). `t` is fp16 or bf16. Exact widening; F16C / AVX2 where the CPU has them.
void widen_half(float* dst, const void* src, size_t count, DType t, float prescale);

// dst[i] = src[i] * factor rounded once to `t` (fp16 or bf16, round to nearest even; no
// multiplication when factor == 1). dst may not overlap src.
void narrow_half(void* dst, const float* src, size_t count, DType t, float factor);

// acc[i] = acc[i] (op) x[i] in float32 (kAverage combines like kSum).
void combine_float(float* acc, const float* x, size_t count, ReduceOp op);

}  // namespace kolo::kernels

// ops/ names them as before they moved here.
namespace kolo::ops {
using kernels::apply_postscale;
using kernels::combine_float;
using kernels::fill_identity;
using kernels::is_half_float;
using kernels::narrow_half;
using kernels::needs_postscale;
using kernels::post_factor;
using kernels::reduce_into;
using kernels::reduce_pair;
using kernels::scale_copy;
using kernels::widen_half;
}  // namespace kolo::ops

// Element-wise kernels of kernels/cpu_reduce.h. Written as plain loops over typed pointers so the
// compiler vectorises them; fp16 uses the F16C instructions when the CPU has them.
#include "kernels/cpu_reduce.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kolo/tensor.h"

namespace kolo::kernels {
namespace {

template <class T>
struct Combine {
  static void run(T* dst, const T* a, const T* b, size_t n, ReduceOp op) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        for (size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(a[i] + b[i]);
        return;
      case ReduceOp::kMin:
        for (size_t i = 0; i < n; ++i) dst[i] = std::min(a[i], b[i]);
        return;
      case ReduceOp::kMax:
        for (size_t i = 0; i < n; ++i) dst[i] = std::max(a[i], b[i]);
        return;
      case ReduceOp::kProduct:
        for (size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(a[i] * b[i]);
        return;
    }
  }
};

// Booleans as torch.distributed reduces them: Sum/Max/Average = OR, Product/Min = AND. Any
// non-zero byte counts as true; the result is 0 or 1.
void combine_bool(uint8_t* dst, const uint8_t* a, const uint8_t* b, size_t n, ReduceOp op) {
  if (op == ReduceOp::kProduct || op == ReduceOp::kMin) {
    for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>((a[i] != 0) & (b[i] != 0));
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>((a[i] != 0) | (b[i] != 0));
  }
}

inline float combine_scalar(float x, float y, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return x + y;
    case ReduceOp::kMin: return std::min(x, y);
    case ReduceOp::kMax: return std::max(x, y);
    case ReduceOp::kProduct: return x * y;
  }
  return x;
}

bool cpu_has_f16c() {
  static const bool has = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return has;
}

__attribute__((target("avx,f16c"))) size_t combine_half_f16c(uint16_t* dst, const uint16_t* a,
                                                              const uint16_t* b, size_t n,
                                                              ReduceOp op) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    __m256 r;
    switch (op) {
      case ReduceOp::kMin: r = _mm256_min_ps(x, y); break;
      case ReduceOp::kMax: r = _mm256_max_ps(x, y); break;
      case ReduceOp::kProduct: r = _mm256_mul_ps(x, y); break;
      default: r = _mm256_add_ps(x, y); break;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  return i;
}

void combine_half(Half* dst, const Half* a, const Half* b, size_t n, ReduceOp op) {
  size_t i = 0;
  if (cpu_has_f16c()) {
    i = combine_half_f16c(reinterpret_cast<uint16_t*>(dst), reinterpret_cast<const uint16_t*>(a),
                          reinterpret_cast<const uint16_t*>(b), n, op);
  }
  for (; i < n; ++i) dst[i] = float_to_half(combine_scalar(half_to_float(a[i]), half_to_float(b[i]), op));
}

void combine_bf16(BFloat16* dst, const BFloat16* a, const BFloat16* b, size_t n, ReduceOp op) {
  for (size_t i = 0; i < n; ++i)
    dst[i] = float_to_bf16(combine_scalar(bf16_to_float(a[i]), bf16_to_float(b[i]), op));
}

bool cpu_has_avx2_f16c() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return has;
}

// Vector parts of widen_half / narrow_half, eight elements at a time; each returns how many
// elements it did, and the caller finishes the tail with the scalar conversions, which round
// the same way (to nearest even). kF16: fp16 through F16C; else bf16, the upper half of a
// float: a shift to widen, round-to-nearest-even by integer addition to narrow (a NaN stays
// a quiet NaN with its sign and upper payload, as float_to_bf16 does).
template <bool kF16>
__attribute__((target("avx2,f16c"))) size_t widen_vec(float* d, const uint16_t* s, size_t n, bool scaled, float pre) {
  const __m256 p = _mm256_set1_ps(pre);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    __m256 v = kF16 ? _mm256_cvtph_ps(h) : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    if (scaled) v = _mm256_mul_ps(v, p);
    _mm256_storeu_ps(d + i, v);
  }
  return i;
}

__attribute__((target("avx2,f16c"))) inline __m128i to_bf16(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40)), nan);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8));
}

template <bool kF16>
__attribute__((target("avx2,f16c"))) size_t narrow_vec(uint16_t* d, const float* s, size_t n, bool scaled, float f) {
  const __m256 k = _mm256_set1_ps(f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(s + i);
    if (scaled) v = _mm256_mul_ps(v, k);
    const __m128i h = kF16 ? _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC) : to_bf16(v);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h);
  }
  return i;
}

template <class T>
void scale_int(T* dst, const T* src, size_t n, double f) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(std::trunc(static_cast<double>(src[i]) * f));
}

template <class T>
void divide_int(T* buf, size_t n, int d) {
  for (size_t i = 0; i < n; ++i) {
    if constexpr (sizeof(T) < sizeof(int64_t))  // d may not fit T (uint8 and 256 ranks)
      buf[i] = static_cast<T>(static_cast<int64_t>(buf[i]) / d);
    else
      buf[i] = static_cast<T>(buf[i] / static_cast<T>(d));
  }
}

}  // namespace

void reduce_pair(void* dst, const void* a, const void* b, size_t n, DType t, ReduceOp op) {
  switch (t) {
    case DType::kUInt8:
      return Combine<uint8_t>::run(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(a),
                                   static_cast<const uint8_t*>(b), n, op);
    case DType::kInt32:
      return Combine<int32_t>::run(static_cast<int32_t*>(dst), static_cast<const int32_t*>(a),
                                   static_cast<const int32_t*>(b), n, op);
    case DType::kInt64:
      return Combine<int64_t>::run(static_cast<int64_t*>(dst), static_cast<const int64_t*>(a),
                                   static_cast<const int64_t*>(b), n, op);
    case DType::kFloat32:
      return Combine<float>::run(static_cast<float*>(dst), static_cast<const float*>(a),
                                 static_cast<const float*>(b), n, op);
    case DType::kFloat64:
      return Combine<double>::run(static_cast<double*>(dst), static_cast<const double*>(a),
                                  static_cast<const double*>(b), n, op);
    case DType::kFloat16:
      return combine_half(static_cast<Half*>(dst), static_cast<const Half*>(a),
                          static_cast<const Half*>(b), n, op);
    case DType::kBFloat16:
      return combine_bf16(static_cast<BFloat16*>(dst), static_cast<const BFloat16*>(a),
                          static_cast<const BFloat16*>(b), n, op);
    case DType::kInt8:
      return Combine<int8_t>::run(static_cast<int8_t*>(dst), static_cast<const int8_t*>(a),
                                  static_cast<const int8_t*>(b), n, op);
    case DType::kInt16:
      return Combine<int16_t>::run(static_cast<int16_t*>(dst), static_cast<const int16_t*>(a),
                                   static_cast<const int16_t*>(b), n, op);
    case DType::kBool:
      return combine_bool(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(a),
                          static_cast<const uint8_t*>(b), n, op);
  }
}

void reduce_into(void* dst, const void* src, size_t n, DType t, ReduceOp op) {
  reduce_pair(dst, dst, src, n, t, op);
}

void scale_copy(void* dst, const void* src, size_t n, DType t, double f) {
  if (f == 1.0) {
    if (dst != src) std::memmove(dst, src, n * dtype_size(t));
    return;
  }
  switch (t) {
    case DType::kUInt8: return scale_int(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n, f);
    case DType::kInt32: return scale_int(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), n, f);
    case DType::kInt64: return scale_int(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), n, f);
    case DType::kInt8: return scale_int(static_cast<int8_t*>(dst), static_cast<const int8_t*>(src), n, f);
    case DType::kInt16: return scale_int(static_cast<int16_t*>(dst), static_cast<const int16_t*>(src), n, f);
    case DType::kBool: {
      // Refused at submission (a scaled truth value means nothing); kept total for callers
      // that bypass it: true stays true unless the factor is zero.
      auto* d = static_cast<uint8_t*>(dst);
      auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(s[i] != 0 && f != 0.0);
      return;
    }
    case DType::kFloat32: {
      const float ff = static_cast<float>(f);
      auto* d = static_cast<float*>(dst);
      auto* s = static_cast<const float*>(src);
      for (size_t i = 0; i < n; ++i) d[i] = s[i] * ff;
      return;
    }
    case DType::kFloat64: {
      auto* d = static_cast<double*>(dst);
      auto* s = static_cast<const double*>(src);
      for (size_t i = 0; i < n; ++i) d[i] = s[i] * f;
      return;
    }
    case DType::kFloat16: {
      const float ff = static_cast<float>(f);
      auto* d = static_cast<Half*>(dst);
      auto* s = static_cast<const Half*>(src);
      for (size_t i = 0; i < n; ++i) d[i] = float_to_half(half_to_float(s[i]) * ff);
      return;
    }
    case DType::kBFloat16: {
      const float ff = static_cast<float>(f);
      auto* d = static_cast<BFloat16*>(dst);
      auto* s = static_cast<const BFloat16*>(src);
      for (size_t i = 0; i < n; ++i) d[i] = float_to_bf16(bf16_to_float(s[i]) * ff);
      return;
    }
  }
}

namespace {

template <class T>
void fill_as(void* dst, size_t n, T v) {
  std::fill_n(static_cast<T*>(dst), n, v);
}

// `largest` is min's identity, `lowest` max's.
template <class T>
void fill_identity_as(void* dst, size_t n, ReduceOp op, T largest, T lowest) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: fill_as<T>(dst, n, T{0}); return;
    case ReduceOp::kProduct: fill_as<T>(dst, n, T{1}); return;
    case ReduceOp::kMin: fill_as<T>(dst, n, largest); return;
    case ReduceOp::kMax: fill_as<T>(dst, n, lowest); return;
  }
}

template <class T>
void fill_identity_int(void* dst, size_t n, ReduceOp op) {
  fill_identity_as<T>(dst, n, op, std::numeric_limits<T>::max(), std::numeric_limits<T>::lowest());
}

template <class T>
void fill_identity_float(void* dst, size_t n, ReduceOp op) {
  fill_identity_as<T>(dst, n, op, std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity());
}

// 16-bit floats by bit pattern: {zero, one, +inf, -inf}.
void fill_identity_half(void* dst, size_t n, ReduceOp op, const uint16_t (&bits)[4]) {
  if (op == ReduceOp::kSum || op == ReduceOp::kAverage || op == ReduceOp::kProduct) {
    fill_as<uint16_t>(dst, n, op == ReduceOp::kProduct ? bits[1] : bits[0]);
    return;
  }
  fill_as<uint16_t>(dst, n, op == ReduceOp::kMin ? bits[2] : bits[3]);
}

}  // namespace

void fill_identity(void* dst, size_t n, DType t, ReduceOp op) {
  static constexpr uint16_t kHalf[4] = {0x0000, 0x3C00, 0x7C00, 0xFC00};
  static constexpr uint16_t kBf16[4] = {0x0000, 0x3F80, 0x7F80, 0xFF80};
  switch (t) {
    case DType::kUInt8: fill_identity_int<uint8_t>(dst, n, op); return;
    case DType::kInt32: fill_identity_int<int32_t>(dst, n, op); return;
    case DType::kInt64: fill_identity_int<int64_t>(dst, n, op); return;
    case DType::kFloat16: fill_identity_half(dst, n, op, kHalf); return;
    case DType::kBFloat16: fill_identity_half(dst, n, op, kBf16); return;
    case DType::kFloat32: fill_identity_float<float>(dst, n, op); return;
    case DType::kFloat64: fill_identity_float<double>(dst, n, op); return;
    case DType::kInt8: fill_identity_int<int8_t>(dst, n, op); return;
    case DType::kInt16: fill_identity_int<int16_t>(dst, n, op); return;
    case DType::kBool:  // false is OR's identity, true AND's
      fill_as<uint8_t>(dst, n, op == ReduceOp::kProduct || op == ReduceOp::kMin ? 1 : 0);
      return;
  }
}

bool needs_postscale(ReduceOp op, int num_ranks, double postscale) {
  return postscale != 1.0 || (op == ReduceOp::kAverage && num_ranks != 1);
}

void apply_postscale(void* buf, size_t n, DType t, ReduceOp op, int num_ranks, double postscale) {
  if (!needs_postscale(op, num_ranks, postscale)) return;
  if (is_floating(t)) {
    double f = postscale;
    if (op == ReduceOp::kAverage) f /= num_ranks;
    scale_copy(buf, buf, n, t, f);
    return;
  }
  if (op == ReduceOp::kAverage && num_ranks != 1) {
    switch (t) {
      case DType::kUInt8: divide_int(static_cast<uint8_t*>(buf), n, num_ranks); break;
      case DType::kInt32: divide_int(static_cast<int32_t*>(buf), n, num_ranks); break;
      case DType::kInt64: divide_int(static_cast<int64_t*>(buf), n, num_ranks); break;
      case DType::kInt8: divide_int(static_cast<int8_t*>(buf), n, num_ranks); break;
      case DType::kInt16: divide_int(static_cast<int16_t*>(buf), n, num_ranks); break;
      default: break;  // kBool: Average is refused at submission
    }
  }
  scale_copy(buf, buf, n, t, postscale);
}

double post_factor(ReduceOp op, int num_ranks, double postscale) {
  if (!needs_postscale(op, num_ranks, postscale)) return 1.0;
  double f = postscale;
  if (op == ReduceOp::kAverage) f /= num_ranks;
  return f;
}

void widen_half(float* dst, const void* src, size_t n, DType t, float prescale) {
  const auto* s = static_cast<const uint16_t*>(src);
  const bool scaled = prescale != 1.0f, f16 = t == DType::kFloat16;
  size_t i = 0;
  if (cpu_has_avx2_f16c()) i = f16 ? widen_vec<true>(dst, s, n, scaled, prescale) : widen_vec<false>(dst, s, n, scaled, prescale);
  for (; i < n; ++i) {
    const float v = f16 ? half_to_float(Half{s[i]}) : bf16_to_float(BFloat16{s[i]});
    dst[i] = scaled ? v * prescale : v;
  }
}

void narrow_half(void* dst, const float* src, size_t n, DType t, float factor) {
  auto* d = static_cast<uint16_t*>(dst);
  const bool scaled = factor != 1.0f, f16 = t == DType::kFloat16;
  size_t i = 0;
  if (cpu_has_avx2_f16c()) i = f16 ? narrow_vec<true>(d, src, n, scaled, factor) : narrow_vec<false>(d, src, n, scaled, factor);
  for (; i < n; ++i) {
    const float v = scaled ? src[i] * factor : src[i];
    d[i] = f16 ? float_to_half(v).bits : float_to_bf16(v).bits;
  }
}

void combine_float(float* acc, const float* x, size_t n, ReduceOp op) {
  Combine<float>::run(acc, acc, x, n, op);
}

}  // namespace kolo::kernels

// N-way reduction of ops/shm/shm_kernels.h.
#include "ops/shm/shm_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu_reduce.h"

namespace kolo::shm {
namespace {

// Work on blocks small enough that `dst` stays in L1 while each source streams past it.
constexpr size_t kBlockBytes = 16 * 1024;

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

// Sums of fp32/fp64 in registers: one load per source and one store per element, where the
// pairwise fold would store and reload dst once per source. Same operations, same order:
// with `pre_on` every source is multiplied by `pre` first (ops::scale_copy's product), with
// `scaled` every sum by `f` before it is stored (apply_postscale's multiplication, in the
// same precision: fp32 by float(f), fp64 by f).
// One source's vector, prescaled. A function, not a lambda in sum_wide: a lambda does not
// inherit sum_wide's target("avx2"), so GCC could not inline the AVX2 helpers into it and made
// every 8-float load a call (h2 saw load_ps as its own symbol in perf of the burst).
template <class T, class V, V (*Load)(const T*), V (*Mul)(V, T)>
__attribute__((target("avx2"), always_inline)) inline V load_source(const T* p, bool pre_on, T pre) {
  const V v = Load(p);
  return pre_on ? Mul(v, pre) : v;
}

template <class T, class V, V (*Load)(const T*), V (*Add)(V, V), V (*Mul)(V, T),
          void (*Store)(T*, V)>
__attribute__((target("avx2"))) void sum_wide(T* dst, T* dst2, const T* const* s, int n,
                                              size_t count, bool pre_on, T pre, bool scaled, T f) {
  constexpr size_t kLanes = sizeof(V) / sizeof(T);
  const auto in = [&](int k, size_t at) __attribute__((target("avx2"), always_inline)) {
    return load_source<T, V, Load, Mul>(s[k] + at, pre_on, pre);
  };
  size_t i = 0;
  for (; i + 2 * kLanes <= count; i += 2 * kLanes) {
    V a0 = Add(in(0, i), in(1, i));
    V a1 = Add(in(0, i + kLanes), in(1, i + kLanes));
    for (int k = 2; k < n; ++k) {
      a0 = Add(a0, in(k, i));
      a1 = Add(a1, in(k, i + kLanes));
    }
    if (scaled) {
      a0 = Mul(a0, f);
      a1 = Mul(a1, f);
    }
    Store(dst + i, a0);
    Store(dst + i + kLanes, a1);
    if (dst2 != nullptr) {
      Store(dst2 + i, a0);
      Store(dst2 + i + kLanes, a1);
    }
  }
  for (; i < count; ++i) {
    const auto x = [&](int k) { return pre_on ? static_cast<T>(s[k][i] * pre) : s[k][i]; };
    T a = x(0) + x(1);
    for (int k = 2; k < n; ++k) a += x(k);
    if (scaled) a = a * f;
    dst[i] = a;
    if (dst2 != nullptr) dst2[i] = a;
  }
}

__attribute__((target("avx2"))) inline __m256 load_ps(const float* p) { return _mm256_loadu_ps(p); }
__attribute__((target("avx2"))) inline __m256 add_ps(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
__attribute__((target("avx2"))) inline __m256 mul_ps(__m256 a, float f) { return _mm256_mul_ps(a, _mm256_set1_ps(f)); }
__attribute__((target("avx2"))) inline void store_ps(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
__attribute__((target("avx2"))) inline __m256d load_pd(const double* p) { return _mm256_loadu_pd(p); }
__attribute__((target("avx2"))) inline __m256d add_pd(__m256d a, __m256d b) { return _mm256_add_pd(a, b); }
__attribute__((target("avx2"))) inline __m256d mul_pd(__m256d a, double f) { return _mm256_mul_pd(a, _mm256_set1_pd(f)); }
__attribute__((target("avx2"))) inline void store_pd(double* p, __m256d v) { _mm256_storeu_pd(p, v); }

__attribute__((target("avx2"))) void sum_f32_avx2(void* dst, void* dst2, const void* const* s,
                                                  int n, size_t count, double pre, bool scaled, double f) {
  sum_wide<float, __m256, load_ps, add_ps, mul_ps, store_ps>(
      static_cast<float*>(dst), static_cast<float*>(dst2), reinterpret_cast<const float* const*>(s), n,
      count, pre != 1.0, static_cast<float>(pre), scaled, static_cast<float>(f));
}

__attribute__((target("avx2"))) void sum_f64_avx2(void* dst, void* dst2, const void* const* s,
                                                  int n, size_t count, double pre, bool scaled, double f) {
  sum_wide<double, __m256d, load_pd, add_pd, mul_pd, store_pd>(
      static_cast<double*>(dst), static_cast<double*>(dst2), reinterpret_cast<const double* const*>(s), n,
      count, pre != 1.0, pre, scaled, f);
}

// fp16 sums in registers: widen (F16C), prescale, add in float32 in rank order, post-scale,
// round once. The same float32 operations as the block path below, so both agree bitwise.
__attribute__((target("avx2,f16c"))) inline __m256 load_h(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
__attribute__((target("avx2,f16c"))) size_t sum_f16_avx2(uint16_t* dst, uint16_t* dst2,
                                                         const uint16_t* const* s, int n, size_t count,
                                                         bool pre_on, float pre, bool scaled, float f) {
  const __m256 p = _mm256_set1_ps(pre), k = _mm256_set1_ps(f);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m256 a = load_h(s[0] + i);
    if (pre_on) a = _mm256_mul_ps(a, p);
    for (int j = 1; j < n; ++j) {
      __m256 x = load_h(s[j] + i);
      if (pre_on) x = _mm256_mul_ps(x, p);
      a = _mm256_add_ps(a, x);
    }
    if (scaled) a = _mm256_mul_ps(a, k);
    const __m128i h = _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    if (dst2 != nullptr) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst2 + i), h);
  }
  return i;
}

bool cpu_has_f16c() {
  static const bool has = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2");
  return has;
}

// fp16/bf16, any op: a block at a time through float32 scratch (ops::widen_half,
// combine_float, narrow_half). Every source's block is read before dst's block is written,
// so dst may alias any source.
void reduce_half_blocks(char* dst, char* dst2, const char* const* srcs, int n, size_t count,
                        DType dtype, ReduceOp op, float pre, float f) {
  constexpr size_t kBlock = 2048;  // floats: two 8 KiB blocks stay in L1
  alignas(64) float acc[kBlock];
  alignas(64) float x[kBlock];
  for (size_t i = 0; i < count; i += kBlock) {
    const size_t m = std::min(kBlock, count - i);
    const size_t off = i * 2;
    ops::widen_half(acc, srcs[0] + off, m, dtype, pre);
    for (int k = 1; k < n; ++k) {
      ops::widen_half(x, srcs[k] + off, m, dtype, pre);
      ops::combine_float(acc, x, m, op);
    }
    ops::narrow_half(dst + off, acc, m, dtype, f);
    if (dst2 != nullptr) std::memcpy(dst2 + off, dst + off, m * 2);
  }
}

// fp16/bf16: see the header. Sums of fp16 in registers where the CPU can; the rest (and
// the tail) in blocks, with the same float32 operations.
void reduce_half(void* dst, void* dst2, const void* const* srcs, int n, size_t count, DType dtype,
                 ReduceOp op, double prescale, double factor) {
  const float pre = static_cast<float>(prescale), f = static_cast<float>(factor);
  size_t done = 0;
  const bool sum = op == ReduceOp::kSum || op == ReduceOp::kAverage;
  if (sum && dtype == DType::kFloat16 && cpu_has_f16c()) {
    done = sum_f16_avx2(static_cast<uint16_t*>(dst), static_cast<uint16_t*>(dst2),
                        reinterpret_cast<const uint16_t* const*>(srcs), n, count, pre != 1.0f, pre, f != 1.0f, f);
  }
  if (done == count) return;
  const char* rest[64];
  std::vector<const char*> many;
  const char** at = rest;
  if (n > 64) {
    many.resize(static_cast<size_t>(n));
    at = many.data();
  }
  for (int k = 0; k < n; ++k) at[k] = static_cast<const char*>(srcs[k]) + done * 2;
  reduce_half_blocks(static_cast<char*>(dst) + done * 2, dst2 != nullptr ? static_cast<char*>(dst2) + done * 2 : nullptr,
                     at, n, count - done, dtype, op, pre, f);
}

// Integers, fp32, fp64, any op: fold reduce_pair over the sources, a block at a time; with
// a prescale each source's block is first scaled into scratch (ops::scale_copy).
void reduce_folded(char* dst, const char* const* srcs, int n, size_t count, DType dtype,
                   ReduceOp op, double pre) {
  const size_t esize = dtype_size(dtype);
  const size_t block = std::max<size_t>(1, kBlockBytes / esize);
  alignas(64) char a[kBlockBytes];
  alignas(64) char b[kBlockBytes];
  for (size_t i = 0; i < count; i += block) {
    const size_t m = std::min(block, count - i);
    const size_t off = i * esize;
    const auto src = [&](int k, char* scratch) -> const char* {
      if (pre == 1.0) return srcs[k] + off;
      ops::scale_copy(scratch, srcs[k] + off, m, dtype, pre);
      return scratch;
    };
    if (n == 1) {
      const char* only = src(0, a);
      if (only != dst + off) std::memmove(dst + off, only, m * esize);
      continue;
    }
    const char* s0 = src(0, a);
    const char* s1 = src(1, b);
    ops::reduce_pair(dst + off, s0, s1, m, dtype, op);
    for (int k = 2; k < n; ++k) ops::reduce_into(dst + off, src(k, a), m, dtype, op);
  }
}

// 128 bytes per iteration through four registers; the tail (< 32 bytes) through memcpy,
// which copies that little with a few moves.
__attribute__((target("avx2"))) void copy_avx2(char* d, const char* s, size_t n) {
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 96));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 32), b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 64), c);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 96), e);
  }
  for (; i + 32 <= n; i += 32)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
  if (i < n) std::memcpy(d + i, s + i, n - i);
}

// Where copy_bytes hands over to memcpy (see the header).
constexpr size_t kVectorCopyLimit = 1u << 20;

}  // namespace

void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes >= kVectorCopyLimit || bytes < 32 || !cpu_has_avx2()) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
  copy_avx2(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
}

void scale_copy(void* dst, const void* src, size_t count, DType dtype, double f) {
  if (f != 1.0) return ops::scale_copy(dst, src, count, dtype, f);
  if (dst != src) copy_bytes(dst, src, count * dtype_size(dtype));
}

bool reduce_uses_avx2() { return cpu_has_avx2(); }

bool reduce_in_place_any(DType dtype, ReduceOp op) {
  if (ops::is_half_float(dtype)) return true;
  const bool sum = op == ReduceOp::kSum || op == ReduceOp::kAverage;
  return sum && cpu_has_avx2() && (dtype == DType::kFloat32 || dtype == DType::kFloat64);
}

void reduce_sources(void* dst, const void* const* srcs, int n, size_t count, DType dtype,
                    ReduceOp op, void* dst2, PostScale post, double prescale) {
  if (count == 0) return;
  const size_t bytes = count * dtype_size(dtype);
  const bool scaled = post.on && ops::needs_postscale(op, post.ranks, post.postscale);
  // apply_postscale's factor for floating types, computed the same way.
  const double f = scaled ? ops::post_factor(op, post.ranks, post.postscale) : 1.0;
  if (ops::is_half_float(dtype)) return reduce_half(dst, dst2, srcs, n, count, dtype, op, prescale, f);
  if (n >= 2 && reduce_in_place_any(dtype, op)) {
    if (dtype == DType::kFloat32) return sum_f32_avx2(dst, dst2, srcs, n, count, prescale, scaled, f);
    return sum_f64_avx2(dst, dst2, srcs, n, count, prescale, scaled, f);
  }
  reduce_folded(static_cast<char*>(dst), reinterpret_cast<const char* const*>(srcs), n, count, dtype, op,
                prescale);
  if (scaled) ops::apply_postscale(dst, count, dtype, op, post.ranks, post.postscale);
  if (dst2 != nullptr && dst2 != dst) copy_bytes(dst2, dst, bytes);
}

void reduce_half_to_float(float* dst, const void* const* srcs, int n, size_t count, DType dtype, ReduceOp op,
                          double prescale) {
  constexpr size_t kBlock = 2048;
  alignas(64) float x[kBlock];
  const float pre = static_cast<float>(prescale);
  for (size_t i = 0; i < count; i += kBlock) {
    const size_t m = std::min(kBlock, count - i);
    ops::widen_half(dst + i, static_cast<const char*>(srcs[0]) + i * 2, m, dtype, pre);
    for (int k = 1; k < n; ++k) {
      ops::widen_half(x, static_cast<const char*>(srcs[k]) + i * 2, m, dtype, pre);
      ops::combine_float(dst + i, x, m, op);
    }
  }
}

}  // namespace kolo::shm

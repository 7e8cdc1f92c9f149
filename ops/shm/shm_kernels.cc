// N-way reduction of ops/shm/shm_kernels.h.
#include "ops/shm/shm_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "ops/cpu_reduce.h"

namespace kolo::shm {
namespace {

// Work on blocks small enough that `dst` stays in L1 while each source streams past it.
constexpr size_t kBlockBytes = 16 * 1024;

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

// Sums of fp32/fp64 in registers: one load per source and one store per element, where the
// pairwise fold would store and reload dst once per source. Same additions, same order.
// With `scaled`, every sum is multiplied by `f` before it is stored (apply_postscale's
// multiplication, in the same precision: fp32 by float(f), fp64 by f).
template <class T, class V, V (*Load)(const T*), V (*Add)(V, V), V (*Mul)(V, T),
          void (*Store)(T*, V)>
__attribute__((target("avx2"))) void sum_wide(T* dst, T* dst2, const T* const* s, int n,
                                              size_t count, bool scaled, T f) {
  constexpr size_t kLanes = sizeof(V) / sizeof(T);
  size_t i = 0;
  for (; i + 2 * kLanes <= count; i += 2 * kLanes) {
    V a0 = Add(Load(s[0] + i), Load(s[1] + i));
    V a1 = Add(Load(s[0] + i + kLanes), Load(s[1] + i + kLanes));
    for (int k = 2; k < n; ++k) {
      a0 = Add(a0, Load(s[k] + i));
      a1 = Add(a1, Load(s[k] + i + kLanes));
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
    T a = s[0][i] + s[1][i];
    for (int k = 2; k < n; ++k) a += s[k][i];
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
                                                  int n, size_t count, bool scaled, double f) {
  sum_wide<float, __m256, load_ps, add_ps, mul_ps, store_ps>(
      static_cast<float*>(dst), static_cast<float*>(dst2), reinterpret_cast<const float* const*>(s), n,
      count, scaled, static_cast<float>(f));
}

__attribute__((target("avx2"))) void sum_f64_avx2(void* dst, void* dst2, const void* const* s,
                                                  int n, size_t count, bool scaled, double f) {
  sum_wide<double, __m256d, load_pd, add_pd, mul_pd, store_pd>(
      static_cast<double*>(dst), static_cast<double*>(dst2), reinterpret_cast<const double* const*>(s), n,
      count, scaled, f);
}

// Any dtype and op: fold reduce_pair over the sources, a block at a time.
void reduce_folded(char* dst, const char* const* srcs, int n, size_t count, DType dtype,
                   ReduceOp op) {
  const size_t esize = dtype_size(dtype);
  const size_t block = std::max<size_t>(1, kBlockBytes / esize);
  for (size_t i = 0; i < count; i += block) {
    const size_t m = std::min(block, count - i);
    const size_t off = i * esize;
    ops::reduce_pair(dst + off, srcs[0] + off, srcs[1] + off, m, dtype, op);
    for (int k = 2; k < n; ++k) ops::reduce_into(dst + off, srcs[k] + off, m, dtype, op);
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
  const bool sum = op == ReduceOp::kSum || op == ReduceOp::kAverage;
  return sum && cpu_has_avx2() && (dtype == DType::kFloat32 || dtype == DType::kFloat64);
}

void reduce_sources(void* dst, const void* const* srcs, int n, size_t count, DType dtype,
                    ReduceOp op, void* dst2, PostScale post) {
  if (count == 0) return;
  const size_t bytes = count * dtype_size(dtype);
  const bool scaled = post.on && ops::needs_postscale(op, post.ranks, post.postscale);
  if (n >= 2 && reduce_in_place_any(dtype, op)) {
    // apply_postscale's factor for floating types, computed the same way.
    double f = post.postscale;
    if (op == ReduceOp::kAverage) f /= post.ranks;
    if (dtype == DType::kFloat32) return sum_f32_avx2(dst, dst2, srcs, n, count, scaled, f);
    return sum_f64_avx2(dst, dst2, srcs, n, count, scaled, f);
  }
  if (n == 1) {
    if (dst != srcs[0]) std::memmove(dst, srcs[0], bytes);  // may overlap: not copy_bytes
  } else {
    reduce_folded(static_cast<char*>(dst), reinterpret_cast<const char* const*>(srcs), n, count,
                  dtype, op);
  }
  if (scaled) ops::apply_postscale(dst, count, dtype, op, post.ranks, post.postscale);
  if (dst2 != nullptr && dst2 != dst) copy_bytes(dst2, dst, bytes);
}

}  // namespace kolo::shm

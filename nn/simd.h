// nn/simd.h — internal: 8-float vectors for the CPU trainer's hand-vectorised loops.
//
// GCC/Clang vector extensions: with -march=native on an AVX machine a v8 is one ymm
// register; elsewhere the compiler lowers the same code to SSE or scalar instructions, so
// the code stays portable x86-64 (and any other target GCC supports). Not a public header.
// (Without AVX, GCC's -Wpsabi notes that a 32-byte vector passed by value has another ABI
// than with AVX; these helpers are inlined and never cross a library boundary, so
// nn/CMakeLists.txt turns that note off.)
// Thread safety: pure functions.
#pragma once

#include <cstring>

namespace kolo::nn::simd {

using v8 = float __attribute__((vector_size(32)));

[[gnu::always_inline]] inline v8 load(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

[[gnu::always_inline]] inline void store(float* p, v8 v) { std::memcpy(p, &v, sizeof v); }

[[gnu::always_inline]] inline v8 splat(float x) { return v8{} + x; }

[[gnu::always_inline]] inline float hsum(v8 v) {
  float s = 0.0f;
  for (int i = 0; i < 8; ++i) s += v[i];
  return s;
}

// Pins a loaded vector to a register. Without it GCC folds each load into the FMAs that
// use it, so a vector is re-read from L1 once per use and register-blocked kernels run
// out of load slots (measured on the 3x3 convolution: forward 47 -> 75 GFLOP/s, weight
// gradient 43 -> 80 on a Zen core with AVX2/FMA). An empty asm statement: no instruction.
[[gnu::always_inline]] inline void in_register([[maybe_unused]] v8& v) {
#ifdef __AVX__
  asm("" : "+x"(v));
#endif
}

}  // namespace kolo::nn::simd

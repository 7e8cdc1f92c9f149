// kvstore/wire.h — values between workers and servers travel in their key's dtype: float32,
// or float16/bfloat16 (half the bytes), while both ends compute in float32 (the store's
// master copy). These convert a run of float32 to and from the wire's bytes.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>

#include "kolo/tensor.h"
#include "kolo/types.h"

namespace kolo::kv {

// The dtypes a value may travel in (the ones the store accepts).
inline bool wire_dtype_ok(DType d) { return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16; }
// Bytes per element on the wire. REQUIRES: wire_dtype_ok(d).
inline int64_t wire_size(DType d) { return d == DType::kFloat32 ? 4 : 2; }

// n floats -> n elements of d at `out` (n * wire_size(d) bytes).
inline void to_wire(const float* in, int64_t n, DType d, void* out) {
  if (d == DType::kFloat32) {
    if (n > 0) std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
  } else if (d == DType::kFloat16) {
    auto* o = static_cast<Half*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = float_to_half(in[i]);
  } else {
    auto* o = static_cast<BFloat16*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = float_to_bf16(in[i]);
  }
}

// n elements of d at `in` -> n floats.
inline void from_wire(const void* in, int64_t n, DType d, float* out) {
  if (d == DType::kFloat32) {
    if (n > 0) std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
  } else if (d == DType::kFloat16) {
    const auto* p = static_cast<const Half*>(in);
    for (int64_t i = 0; i < n; ++i) out[i] = half_to_float(p[i]);
  } else {
    const auto* p = static_cast<const BFloat16*>(in);
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(p[i]);
  }
}

}  // namespace kolo::kv

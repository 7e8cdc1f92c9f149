// kolo/tensor.h — TensorView, the description of user memory that kolo works on, and
// Tensor, a small owning buffer that kolo returns where the result's size is only known
// after negotiation (allgather).
//
// Ownership: a TensorView never owns memory. Memory passed to an *_async call must stay
// valid, and must not be touched by the caller, until its Handle completes.
// Thread safety: plain values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kolo/types.h"

namespace kolo {

using Shape = std::vector<int64_t>;

// Number of elements of `shape` (1 for a scalar shape []).
int64_t num_elements(const Shape& shape);
// "[120,400]"
std::string shape_string(const Shape& shape);

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  Shape shape;
  Device device = Device::cpu();
  // GPU only: a cudaEvent_t recorded after the producer's last write; kolo's GPU path waits
  // on it before reading. nullptr means "ready now".
  void* ready_event = nullptr;

  int64_t num_elements() const { return kolo::num_elements(shape); }
  size_t num_bytes() const { return static_cast<size_t>(num_elements()) * dtype_size(dtype); }

  template <class T>
  static TensorView of(T* p, Shape s);  // defined for the element types kolo knows
  template <class T>
  static TensorView of(std::vector<T>& v) { return of(v.data(), Shape{static_cast<int64_t>(v.size())}); }
};

// An owning, contiguous CPU tensor.
struct Tensor {
  DType dtype = DType::kFloat32;
  Shape shape;
  std::vector<std::byte> bytes;

  template <class T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
  template <class T>
  T* data() { return reinterpret_cast<T*>(bytes.data()); }
  int64_t num_elements() const { return kolo::num_elements(shape); }
};

// 16-bit float storage types (bit patterns; arithmetic goes through float).
struct Half {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};

template <class T>
struct dtype_of;
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::kUInt8; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::kFloat16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::kBFloat16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::kFloat32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::kFloat64; };

template <class T>
TensorView TensorView::of(T* p, Shape s) {
  TensorView v;
  v.data = p;
  v.dtype = dtype_of<T>::value;
  v.shape = std::move(s);
  return v;
}

// Conversions between float and the 16-bit formats (round to nearest even).
float half_to_float(Half h);
Half float_to_half(float f);
float bf16_to_float(BFloat16 b);
BFloat16 float_to_bf16(float f);

}  // namespace kolo

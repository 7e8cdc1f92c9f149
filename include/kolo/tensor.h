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
#include <new>
#include <string>
#include <utility>
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

namespace detail {
// Tensor memory (core/tensor_memory.cc). Blocks of kKeptBlockMin bytes or more are kept when
// freed (up to kKeptBlocks of them, kKeptBytesMax in all, per process) and handed out again
// to a later request they fit (at most twice its size): a result of tens of MB that a
// collective returns every step then lands in pages already mapped, instead of pages the
// kernel must fault in and zero on every call (about a third of a 64 MB alltoall's time
// here). Smaller blocks go to operator new. Thread-safe.
inline constexpr size_t kKeptBlockMin = size_t{1} << 20;
inline constexpr size_t kKeptBlocks = 4;
inline constexpr size_t kKeptBytesMax = size_t{256} << 20;
void* tensor_allocate(size_t bytes);
void tensor_deallocate(void* p, size_t bytes) noexcept;
// Bytes currently kept for reuse (for tests).
size_t tensor_kept_bytes();
}  // namespace detail

// The allocator of Tensor::bytes: memory from detail::tensor_allocate, and resize() leaves
// new bytes uninitialised (kolo writes every byte of a result it returns; zeroing them first
// cost as much as the copy itself). Code that grows a Tensor itself must write what it adds.
template <class T>
struct TensorAllocator {
  using value_type = T;
  TensorAllocator() = default;
  template <class U>
  TensorAllocator(const TensorAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(detail::tensor_allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { detail::tensor_deallocate(p, n * sizeof(T)); }
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-initialised: no zeroing
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
  template <class U>
  bool operator==(const TensorAllocator<U>&) const noexcept { return true; }
};
using TensorBytes = std::vector<std::byte, TensorAllocator<std::byte>>;

// An owning, contiguous CPU tensor.
struct Tensor {
  DType dtype = DType::kFloat32;
  Shape shape;
  TensorBytes bytes;

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
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::kInt8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::kInt16; };
static_assert(sizeof(bool) == 1, "kolo's bool elements are one byte");
template <> struct dtype_of<bool> { static constexpr DType value = DType::kBool; };
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

// kolo/types.h — the small value types every kolo API speaks: element types, reduction
// operators, collective kinds and devices.
//
// Thread safety: plain values and pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kolo {

// Element type of a tensor. The numeric values travel in negotiation messages: append only.
enum class DType : uint8_t {
  kUInt8 = 0,
  kInt32 = 1,
  kInt64 = 2,
  kFloat16 = 3,   // IEEE 754 binary16
  kBFloat16 = 4,  // bfloat16 (upper half of a float32)
  kFloat32 = 5,
  kFloat64 = 6,
  kInt8 = 7,
  kInt16 = 8,
  kBool = 9,  // one byte, 0 or 1; reductions are logical (see ReduceOp)
};
inline constexpr int kNumDTypes = 10;

// Size in bytes of one element of `t`.
size_t dtype_size(DType t);
// "float32", "bfloat16", ... as users write them.
std::string_view dtype_name(DType t);
bool is_floating(DType t);

// How allreduce combines the ranks' values. Average = Sum followed by a scale of 1/size
// (for integer types: the sum divided by size, truncated toward zero). For kBool, as in
// torch.distributed: Sum and Max are a logical OR, Product and Min a logical AND; Average and
// scale factors other than 1 are refused at submission.
enum class ReduceOp : uint8_t { kSum = 0, kAverage = 1, kMin = 2, kMax = 3, kProduct = 4 };
inline constexpr int kNumReduceOps = 5;
std::string_view reduce_op_name(ReduceOp op);

// Which collective a request asks for. The numeric values travel in negotiation messages:
// append only.
enum class OpKind : uint8_t { kAllreduce = 0, kBroadcast = 1, kAllgather = 2, kAlltoall = 3, kReducescatter = 4 };
inline constexpr int kNumOpKinds = 5;
std::string_view op_kind_name(OpKind k);

// Where a tensor's memory lives. `id` is the GPU ordinal for kGpu, ignored for kCpu.
struct Device {
  enum class Kind : uint8_t { kCpu = 0, kGpu = 1 };
  Kind kind = Kind::kCpu;
  int id = 0;
  static Device cpu() { return {}; }
  static Device gpu(int ordinal) { return {Kind::kGpu, ordinal}; }
  bool is_cpu() const { return kind == Kind::kCpu; }
  bool operator==(const Device&) const = default;
};
std::string device_name(const Device& d);  // "cpu", "gpu:1"

}  // namespace kolo

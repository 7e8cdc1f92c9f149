// Names and sizes for the value types of kolo/types.h and kolo/tensor.h.
#include <cstring>

#include "kolo/status.h"
#include "kolo/tensor.h"
#include "kolo/types.h"

namespace kolo {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kUInt8: return 1;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kInt8: return 1;
    case DType::kInt16: return 2;
    case DType::kBool: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kBool: return "bool";
  }
  return "unknown-dtype";
}

bool is_floating(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 ||
         t == DType::kFloat64;
}

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAverage: return "average";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kProduct: return "product";
  }
  return "unknown-op";
}

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kAllreduce: return "allreduce";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kAllgather: return "allgather";
    case OpKind::kAlltoall: return "alltoall";
    case OpKind::kReducescatter: return "reducescatter";
  }
  return "unknown-collective";
}

std::string device_name(const Device& d) {
  return d.is_cpu() ? std::string("cpu") : "gpu:" + std::to_string(d.id);
}

int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

const char* status_code_name(Status::Code c) {
  switch (c) {
    case Status::Code::kOk: return "ok";
    case Status::Code::kInvalidArgument: return "invalid argument";
    case Status::Code::kMismatch: return "mismatch across ranks";
    case Status::Code::kAborted: return "aborted";
    case Status::Code::kTimeout: return "timeout";
    case Status::Code::kCommunication: return "communication failure";
    case Status::Code::kInternal: return "internal error";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message();
}

const std::string& Status::empty() {
  static const std::string none;
  return none;
}

Status Status::at(const char* file, int line) && {
  if (!rep_) rep_ = std::make_unique<Rep>();  // an error made without a message
  const char* name = std::strrchr(file, '/');
  name = name ? name + 1 : file;
  if (!rep_->where.empty()) rep_->where += " < ";
  rep_->where += std::string(name) + ":" + std::to_string(line);
  return std::move(*this);
}

// --- 16-bit floats ------------------------------------------------------------------------

static uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
static float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float half_to_float(Half h) {
  const uint32_t sign = (h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1f;
  const uint32_t mant = h.bits & 0x3ff;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp != 0) return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return bits_float(sign);  // +-0
  // Subnormal half: value = mant * 2^-24.
  float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

Half float_to_half(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan (keep nan quiet and non-zero)
    return Half{static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u))};
  }
  if (abs >= 0x477ff000u) return Half{static_cast<uint16_t>(sign | 0x7c00u)};  // overflow
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: round abs/2^-24 to nearest even integer.
    const float a = bits_float(abs) * 16777216.0f;  // exact scaling by 2^24
    const uint32_t r = static_cast<uint32_t>(__builtin_nearbyintf(a));
    return Half{static_cast<uint16_t>(sign | r)};
  }
  // Normal: rebias exponent, round mantissa to nearest even.
  uint32_t m = abs + 0xc8000000u;  // exponent - 112
  m += 0x0fffu + ((m >> 13) & 1u);
  return Half{static_cast<uint16_t>(sign | (m >> 13))};
}

float bf16_to_float(BFloat16 b) { return bits_float(static_cast<uint32_t>(b.bits) << 16); }

BFloat16 float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return BFloat16{static_cast<uint16_t>(u >> 16)};
}

}  // namespace kolo

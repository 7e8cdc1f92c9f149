// Reference inputs and results for the shared-memory tests: test/shm/shm_test_data.h.
#include "test/shm/shm_test_data.h"

#include <algorithm>
#include <cstring>

#include "kolo/tensor.h"
#include "kernels/cpu_reduce.h"

namespace kolo::shm::testing {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A value in a small range: non-zero for products, fractional for floats (so rounding and
// the order of additions matter and are exercised).
double value_for(uint64_t seed, int rank, size_t i, DType dtype, ReduceOp op) {
  const uint64_t h = mix(seed ^ mix(static_cast<uint64_t>(rank) * 1000003u + i));
  const bool product = op == ReduceOp::kProduct;
  if (dtype == DType::kUInt8) return static_cast<double>(product ? 1 + h % 3 : h % 60);
  if (dtype == DType::kInt8 && !product) return static_cast<double>(static_cast<int64_t>(h % 11) - 5);
  if (!is_floating(dtype)) {
    const int64_t v = product ? static_cast<int64_t>(h % 5) - 2 : static_cast<int64_t>(h % 2001) - 1000;
    return static_cast<double>(v == 0 && product ? 1 : v);
  }
  const double unit = static_cast<double>(h % 1000001) / 1000000.0;  // [0, 1]
  return product ? 0.5 + unit : (unit - 0.5) * 8.0;
}

void store(std::byte* buf, size_t i, DType dtype, double v) {
  switch (dtype) {
    case DType::kUInt8: reinterpret_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); return;
    case DType::kInt32: reinterpret_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); return;
    case DType::kInt64: reinterpret_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); return;
    case DType::kInt8: reinterpret_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); return;
    case DType::kInt16: reinterpret_cast<int16_t*>(buf)[i] = static_cast<int16_t>(v); return;
    case DType::kBool: reinterpret_cast<uint8_t*>(buf)[i] = v != 0; return;
    case DType::kFloat16: reinterpret_cast<Half*>(buf)[i] = float_to_half(static_cast<float>(v)); return;
    case DType::kBFloat16: reinterpret_cast<BFloat16*>(buf)[i] = float_to_bf16(static_cast<float>(v)); return;
    case DType::kFloat32: reinterpret_cast<float*>(buf)[i] = static_cast<float>(v); return;
    case DType::kFloat64: reinterpret_cast<double*>(buf)[i] = v; return;
  }
}

}  // namespace

double element(const std::byte* buf, size_t i, DType dtype) {
  switch (dtype) {
    case DType::kUInt8: return reinterpret_cast<const uint8_t*>(buf)[i];
    case DType::kInt32: return reinterpret_cast<const int32_t*>(buf)[i];
    case DType::kInt64: return static_cast<double>(reinterpret_cast<const int64_t*>(buf)[i]);
    case DType::kInt8: return reinterpret_cast<const int8_t*>(buf)[i];
    case DType::kInt16: return reinterpret_cast<const int16_t*>(buf)[i];
    case DType::kBool: return reinterpret_cast<const uint8_t*>(buf)[i];
    case DType::kFloat16: return half_to_float(reinterpret_cast<const Half*>(buf)[i]);
    case DType::kBFloat16: return bf16_to_float(reinterpret_cast<const BFloat16*>(buf)[i]);
    case DType::kFloat32: return reinterpret_cast<const float*>(buf)[i];
    case DType::kFloat64: return reinterpret_cast<const double*>(buf)[i];
  }
  return 0;
}

std::vector<std::byte> make_input(uint64_t seed, int rank, size_t count, DType dtype, ReduceOp op) {
  std::vector<std::byte> buf(count * dtype_size(dtype));
  for (size_t i = 0; i < count; ++i) store(buf.data(), i, dtype, value_for(seed, rank, i, dtype, op));
  return buf;
}

namespace {

float to_float(const std::byte* buf, size_t i, DType dtype) {
  return static_cast<float>(element(buf, i, dtype));  // exact for fp16 / bf16
}

// fp16/bf16: widened to float32 with the prescale, combined in float32 in rank order, the
// post factor applied in float32, one rounding to 16 bits (docs/runtime.md).
std::vector<std::byte> reference_half(uint64_t seed, int nranks, size_t count, DType dtype, ReduceOp op,
                                      double prescale, double postscale) {
  const float pre = static_cast<float>(prescale);
  std::vector<float> acc(count);
  for (int r = 0; r < nranks; ++r) {
    const std::vector<std::byte> x = make_input(seed, r, count, dtype, op);
    for (size_t i = 0; i < count; ++i) {
      float v = to_float(x.data(), i, dtype);
      if (pre != 1.0f) v = v * pre;
      if (r == 0) {
        acc[i] = v;
        continue;
      }
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAverage: acc[i] = acc[i] + v; break;
        case ReduceOp::kMin: acc[i] = std::min(acc[i], v); break;
        case ReduceOp::kMax: acc[i] = std::max(acc[i], v); break;
        case ReduceOp::kProduct: acc[i] = acc[i] * v; break;
      }
    }
  }
  double f = postscale;
  if (op == ReduceOp::kAverage) f /= nranks;
  const float ff = static_cast<float>(f);
  std::vector<std::byte> out(count * 2);
  for (size_t i = 0; i < count; ++i) {
    const float v = ff != 1.0f ? acc[i] * ff : acc[i];
    const uint16_t bits = dtype == DType::kFloat16 ? float_to_half(v).bits : float_to_bf16(v).bits;
    std::memcpy(out.data() + i * 2, &bits, 2);
  }
  return out;
}

}  // namespace

std::vector<std::byte> reference_allreduce(uint64_t seed, int nranks, size_t count, DType dtype,
                                           ReduceOp op, double prescale, double postscale) {
  if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) {
    return reference_half(seed, nranks, count, dtype, op, prescale, postscale);
  }
  std::vector<std::byte> acc = make_input(seed, 0, count, dtype, op);
  ops::scale_copy(acc.data(), acc.data(), count, dtype, prescale);
  for (int r = 1; r < nranks; ++r) {
    std::vector<std::byte> x = make_input(seed, r, count, dtype, op);
    ops::scale_copy(x.data(), x.data(), count, dtype, prescale);
    ops::reduce_into(acc.data(), x.data(), count, dtype, op);
  }
  ops::apply_postscale(acc.data(), count, dtype, op, nranks, postscale);
  return acc;
}

std::string first_difference(const std::vector<std::byte>& got,
                             const std::vector<std::byte>& want, DType dtype) {
  if (got.size() != want.size()) {
    return "sizes differ: " + std::to_string(got.size()) + " vs " + std::to_string(want.size()) + " bytes";
  }
  const size_t es = dtype_size(dtype);
  for (size_t i = 0; i < got.size() / es; ++i) {
    if (std::memcmp(got.data() + i * es, want.data() + i * es, es) != 0) {
      return "element " + std::to_string(i) + " is " + std::to_string(element(got.data(), i, dtype)) +
             ", expected " + std::to_string(element(want.data(), i, dtype));
    }
  }
  return "";
}

std::string check_allreduce(ShmGroup& g, uint64_t seed, size_t count, DType dtype, ReduceOp op,
                            double prescale, double postscale, int pieces) {
  std::vector<std::byte> buf = make_input(seed, g.local_rank(), count, dtype, op);
  const size_t es = dtype_size(dtype);
  std::vector<Piece> parts;
  // Uneven pieces, some of them empty, listed even ones first: the engine joins pieces that
  // follow each other in memory (detail::Pieces), and this way only some of them do (two
  // pieces with an empty one between them).
  for (int first : {0, 1}) {
    for (int k = first; k < pieces; k += 2) {
      const size_t lo = count * static_cast<size_t>(k) * k / (static_cast<size_t>(pieces) * pieces);
      const size_t hi = count * static_cast<size_t>(k + 1) * (k + 1) / (static_cast<size_t>(pieces) * pieces);
      parts.push_back({buf.data() + lo * es, hi - lo});
    }
  }
  const std::string what = std::string(dtype_name(dtype)) + " " + std::string(reduce_op_name(op)) +
                           " count " + std::to_string(count) + " pieces " + std::to_string(pieces) +
                           " prescale " + std::to_string(prescale) + " postscale " +
                           std::to_string(postscale) + ": ";
  Status s = g.allreduce(parts, dtype, op, prescale, postscale);
  if (!s.is_ok()) return what + s.to_string();
  const std::string diff =
      first_difference(buf, reference_allreduce(seed, g.local_size(), count, dtype, op, prescale, postscale), dtype);
  return diff.empty() ? "" : what + diff;
}

uint64_t hash_bytes(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  const auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ULL;
  return h;
}

}  // namespace kolo::shm::testing

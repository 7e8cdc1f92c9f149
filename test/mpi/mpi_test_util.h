// Helpers for multi-rank tests: deterministic data from (seed, rank, index) so every rank
// can compute the exact expected result alone, typed element access, bounded waits.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "kolo/kolo.h"

namespace kolo::test {

// Every wait on a peer in a test is bounded: a hang becomes a failure.
inline void wait_ok(const Handle& h, int seconds = 60) {
  REQUIRE(h.wait_for(std::chrono::seconds(seconds)));
  synchronize(h);
}

// The Error a handle failed with (fails the test if it succeeded or took too long).
inline std::string wait_error(const Handle& h, int seconds = 60) {
  REQUIRE(h.wait_for(std::chrono::seconds(seconds)));
  const Status& s = h.status();
  REQUIRE_FALSE(s.is_ok());
  return s.message();
}

// Whether repeated collectives go through the fast path's board in this job (one host, not
// switched off): probed with a few allreduces of one name, so a test can require that other
// collectives use the board exactly where allreduce does.
inline bool board_in_use() {
  const uint64_t before = runtime_stats().fast_collectives;
  std::vector<float> v(4, 1.0f);
  for (int i = 0; i < 4; ++i) allreduce(TensorView::of(v), "test.board-probe", {ReduceOp::kSum});
  return runtime_stats().fast_collectives > before;
}

inline double get(const void* buf, DType t, size_t i) {
  switch (t) {
    case DType::kUInt8: return static_cast<const uint8_t*>(buf)[i];
    case DType::kInt32: return static_cast<const int32_t*>(buf)[i];
    case DType::kInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DType::kInt8: return static_cast<const int8_t*>(buf)[i];
    case DType::kInt16: return static_cast<const int16_t*>(buf)[i];
    case DType::kBool: return static_cast<const uint8_t*>(buf)[i];
    case DType::kFloat16: return half_to_float(static_cast<const Half*>(buf)[i]);
    case DType::kBFloat16: return bf16_to_float(static_cast<const BFloat16*>(buf)[i]);
    case DType::kFloat32: return static_cast<const float*>(buf)[i];
    case DType::kFloat64: return static_cast<const double*>(buf)[i];
  }
  return 0;
}

inline void set(void* buf, DType t, size_t i, double v) {
  switch (t) {
    case DType::kUInt8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case DType::kInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case DType::kInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case DType::kInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case DType::kInt16: static_cast<int16_t*>(buf)[i] = static_cast<int16_t>(v); break;
    case DType::kBool: static_cast<uint8_t*>(buf)[i] = v != 0; break;
    case DType::kFloat16: static_cast<Half*>(buf)[i] = float_to_half(static_cast<float>(v)); break;
    case DType::kBFloat16: static_cast<BFloat16*>(buf)[i] = float_to_bf16(static_cast<float>(v)); break;
    case DType::kFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case DType::kFloat64: static_cast<double*>(buf)[i] = v; break;
  }
}

inline const std::vector<DType>& all_dtypes() {
  // Every dtype with arithmetic reductions (kBool reduces logically: its own tests).
  static const std::vector<DType> v = {DType::kUInt8,   DType::kInt8,     DType::kInt16,   DType::kInt32, DType::kInt64,
                                       DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64};
  return v;
}
inline const std::vector<ReduceOp>& all_reduce_ops() {
  static const std::vector<ReduceOp> v = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                                          ReduceOp::kProduct};
  return v;
}

// A small integer, exactly representable in every dtype, whose reduction over <= 8 ranks
// stays representable too (uint8 values are non-negative; int8 products: <= 6 ranks).
inline double input_value(uint64_t seed, int rank, size_t i, DType t, ReduceOp op) {
  const uint64_t k = seed * 1000003u + static_cast<uint64_t>(rank) * 7919u + i * 31u;
  const bool is_unsigned = t == DType::kUInt8;
  switch (op) {
    case ReduceOp::kProduct: {
      static const double pos[] = {1, 2, 3}, sgn[] = {1, 2, -1};
      return is_unsigned ? pos[k % 3] : sgn[k % 3];
    }
    case ReduceOp::kMin:
    case ReduceOp::kMax: return is_unsigned ? static_cast<double>(k % 23) : static_cast<double>(k % 23) - 11;
    default: return is_unsigned ? static_cast<double>(k % 5) : static_cast<double>(k % 9) - 4;
  }
}

// What every rank must hold after allreduce of input_value over `size` ranks.
inline double expected_allreduce(uint64_t seed, int size, size_t i, DType t, ReduceOp op, double prescale,
                                 double postscale) {
  const bool integral = !is_floating(t);
  double acc = 0;
  for (int r = 0; r < size; ++r) {
    double v = input_value(seed, r, i, t, op) * prescale;
    if (integral) v = std::trunc(v);
    if (r == 0) acc = v;
    else if (op == ReduceOp::kMin) acc = std::min(acc, v);
    else if (op == ReduceOp::kMax) acc = std::max(acc, v);
    else if (op == ReduceOp::kProduct) acc *= v;
    else acc += v;
  }
  if (op == ReduceOp::kAverage) acc = integral ? std::trunc(acc / size) : acc / size;
  acc *= postscale;
  return integral ? std::trunc(acc) : acc;
}

// expected_allreduce over the ranks in `contributors` only (average divides by their count): the
// members of a process set, or the ranks that have not joined.
inline double expected_over(const std::vector<int>& contributors, uint64_t seed, size_t i, DType t, ReduceOp op,
                            double prescale = 1.0, double postscale = 1.0) {
  const bool integral = !is_floating(t);
  double acc = 0;
  bool first = true;
  for (int r : contributors) {
    double v = input_value(seed, r, i, t, op) * prescale;
    if (integral) v = std::trunc(v);
    if (first) acc = v;
    else if (op == ReduceOp::kMin) acc = std::min(acc, v);
    else if (op == ReduceOp::kMax) acc = std::max(acc, v);
    else if (op == ReduceOp::kProduct) acc *= v;
    else acc += v;
    first = false;
  }
  const double n = static_cast<double>(contributors.size());
  if (op == ReduceOp::kAverage) acc = integral ? std::trunc(acc / n) : acc / n;
  acc *= postscale;
  return integral ? std::trunc(acc) : acc;
}

inline double tolerance(DType t, double expected) {
  const double mag = std::max(1.0, std::abs(expected));
  switch (t) {
    case DType::kFloat16: return 2e-3 * mag;
    case DType::kBFloat16: return 1.6e-2 * mag;
    case DType::kFloat32: return 1e-6 * mag;
    case DType::kFloat64: return 1e-12 * mag;
    default: return 0;
  }
}

// A byte buffer holding `count` elements of `t`.
struct Buffer {
  DType dtype;
  std::vector<std::byte> bytes;
  Buffer(DType t, size_t count) : dtype(t), bytes(count * dtype_size(t)) {}
  size_t count() const { return bytes.size() / dtype_size(dtype); }
  TensorView view(Shape shape) { return TensorView{bytes.data(), dtype, std::move(shape)}; }
  TensorView view() { return view({static_cast<int64_t>(count())}); }
  double at(size_t i) const { return get(bytes.data(), dtype, i); }
  void put(size_t i, double v) { set(bytes.data(), dtype, i, v); }
};

}  // namespace kolo::test

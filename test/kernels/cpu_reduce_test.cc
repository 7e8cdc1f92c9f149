// CPU kernels against scalar references: fp16/bf16 reductions against fp64, conversions,
// integer average semantics.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "kolo/tensor.h"
#include "kernels/cpu_reduce.h"

using namespace kolo;

TEST_CASE("every finite half value converts to float and back unchanged", "[kernels]") {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    Half h{static_cast<uint16_t>(bits)};
    float f = half_to_float(h);
    if (std::isnan(f)) {
      CHECK(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    INFO("bits " << bits);
    REQUIRE(float_to_half(f).bits == h.bits);
  }
}

TEST_CASE("half conversion rounds to nearest even and saturates to infinity", "[kernels]") {
  CHECK(half_to_float(float_to_half(1.0f)) == 1.0f);
  CHECK(half_to_float(float_to_half(65504.0f)) == 65504.0f);
  CHECK(std::isinf(half_to_float(float_to_half(65520.0f))));
  CHECK(half_to_float(float_to_half(65519.0f)) == 65504.0f);
  // 1 + 2^-11 is halfway between 1 and 1+2^-10: ties to even (1.0).
  CHECK(half_to_float(float_to_half(1.0f + std::ldexp(1.0f, -11))) == 1.0f);
  CHECK(half_to_float(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11))) == 1.0f + std::ldexp(1.0f, -9));
  CHECK(half_to_float(float_to_half(std::ldexp(1.0f, -24))) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(half_to_float(float_to_half(std::ldexp(1.0f, -26))) == 0.0f);
}

TEST_CASE("bf16 conversion keeps the float exponent and rounds the mantissa", "[kernels]") {
  CHECK(bf16_to_float(float_to_bf16(1.0f)) == 1.0f);
  CHECK(bf16_to_float(float_to_bf16(3.0e38f)) == Approx(3.0e38f).epsilon(0.01));
  CHECK(bf16_to_float(float_to_bf16(1.0f + std::ldexp(1.0f, -8))) == 1.0f);  // tie to even
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEMPLATE_TEST_CASE_SIG("16-bit float reductions match an fp64 reference", "[kernels]", ((DType T), T),
                       DType::kFloat16, DType::kBFloat16) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-4.f, 4.f);
  const size_t n = 1037;  // odd: exercises the vector tail
  std::vector<uint16_t> a(n), b(n), out(n);
  auto to16 = [](float f) { return T == DType::kFloat16 ? float_to_half(f).bits : float_to_bf16(f).bits; };
  auto from16 = [](uint16_t v) { return T == DType::kFloat16 ? half_to_float(Half{v}) : bf16_to_float(BFloat16{v}); };
  for (size_t i = 0; i < n; ++i) {
    a[i] = to16(dist(rng));
    b[i] = to16(dist(rng));
  }
  const double tol = T == DType::kFloat16 ? 1.0 / 1024 : 1.0 / 128;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
    kernels::reduce_pair(out.data(), a.data(), b.data(), n, T, op);
    for (size_t i = 0; i < n; ++i) {
      double x = from16(a[i]), y = from16(b[i]), ref = 0;
      switch (op) {
        case ReduceOp::kSum: ref = x + y; break;
        case ReduceOp::kMin: ref = std::min(x, y); break;
        case ReduceOp::kMax: ref = std::max(x, y); break;
        default: ref = x * y; break;
      }
      INFO("op " << reduce_op_name(op) << " i " << i << " x " << x << " y " << y);
      REQUIRE(std::abs(from16(out[i]) - ref) <= tol * std::max(1.0, std::abs(ref)));
    }
  }
}

TEST_CASE("integer average divides the sum, truncating toward zero", "[kernels]") {
  std::vector<int32_t> v = {7, -7, 3, 0};
  kernels::apply_postscale(v.data(), v.size(), DType::kInt32, ReduceOp::kAverage, 3, 1.0);
  CHECK(v == std::vector<int32_t>{2, -2, 1, 0});
  std::vector<int64_t> w = {9};
  kernels::apply_postscale(w.data(), 1, DType::kInt64, ReduceOp::kSum, 3, 0.5);
  CHECK(w[0] == 4);
}

TEST_CASE("float average and scales fold into one multiply", "[kernels]") {
  std::vector<double> v = {6.0, -3.0};
  kernels::apply_postscale(v.data(), 2, DType::kFloat64, ReduceOp::kAverage, 3, 2.0);
  CHECK(v == std::vector<double>{4.0, -2.0});
  CHECK_FALSE(kernels::needs_postscale(ReduceOp::kAverage, 1, 1.0));
  CHECK(kernels::needs_postscale(ReduceOp::kSum, 4, 0.5));
  std::vector<float> src = {1, 2, 3}, dst(3);
  kernels::scale_copy(dst.data(), src.data(), 3, DType::kFloat32, 0.5);
  CHECK(dst == std::vector<float>{0.5f, 1.0f, 1.5f});
}

TEST_CASE("fill_identity leaves every value unchanged under its op", "[kernels][join]") {
  for (DType t : {DType::kUInt8, DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kFloat16,
                  DType::kBFloat16, DType::kFloat32, DType::kFloat64, DType::kBool}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      const size_t n = 5, es = dtype_size(t);
      std::vector<std::byte> x(n * es), id(n * es), out(n * es);
      // 0, 1, 2, 3, 100 (and negatives where the type has them) in the type's own encoding
      const double vals[n] = {0, 1, 2, 3, 100};
      for (size_t i = 0; i < n; ++i) {
        const double v = is_floating(t) || t != DType::kUInt8 ? vals[i] * (i % 2 ? -1 : 1) : vals[i];
        switch (t) {
          case DType::kUInt8: reinterpret_cast<uint8_t*>(x.data())[i] = static_cast<uint8_t>(v); break;
          case DType::kInt8: reinterpret_cast<int8_t*>(x.data())[i] = static_cast<int8_t>(v); break;
          case DType::kInt16: reinterpret_cast<int16_t*>(x.data())[i] = static_cast<int16_t>(v); break;
          case DType::kBool: reinterpret_cast<uint8_t*>(x.data())[i] = i % 2; break;
          case DType::kInt32: reinterpret_cast<int32_t*>(x.data())[i] = static_cast<int32_t>(v); break;
          case DType::kInt64: reinterpret_cast<int64_t*>(x.data())[i] = static_cast<int64_t>(v); break;
          case DType::kFloat16: reinterpret_cast<Half*>(x.data())[i] = float_to_half(static_cast<float>(v)); break;
          case DType::kBFloat16: reinterpret_cast<BFloat16*>(x.data())[i] = float_to_bf16(static_cast<float>(v)); break;
          case DType::kFloat32: reinterpret_cast<float*>(x.data())[i] = static_cast<float>(v); break;
          case DType::kFloat64: reinterpret_cast<double*>(x.data())[i] = v; break;
        }
      }
      kernels::fill_identity(id.data(), n, t, op);
      kernels::reduce_pair(out.data(), x.data(), id.data(), n, t, op);
      INFO(dtype_name(t) << " " << reduce_op_name(op));
      CHECK(std::memcmp(out.data(), x.data(), x.size()) == 0);
      kernels::reduce_pair(out.data(), id.data(), x.data(), n, t, op);
      CHECK(std::memcmp(out.data(), x.data(), x.size()) == 0);
    }
  }
}

TEST_CASE("bool reduces as torch.distributed does: sum and max OR, product and min AND", "[kernels]") {
  // Every pairing of false/true, and a non-zero byte other than 1 that must count as true.
  const std::vector<uint8_t> a = {0, 0, 1, 1, 7}, b = {0, 1, 0, 1, 0};
  const std::vector<uint8_t> any = {0, 1, 1, 1, 1}, all = {0, 0, 0, 1, 0};
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kProduct, ReduceOp::kMin}) {
    std::vector<uint8_t> out(a.size(), 9);
    kernels::reduce_pair(out.data(), a.data(), b.data(), a.size(), DType::kBool, op);
    INFO(reduce_op_name(op));
    CHECK(out == (op == ReduceOp::kSum || op == ReduceOp::kMax ? any : all));
  }
}

TEST_CASE("int8 and int16 reduce and average in their own width", "[kernels]") {
  std::vector<int8_t> a = {100, -100, 5, -7}, b = {27, -28, -9, 3};
  kernels::reduce_into(a.data(), b.data(), a.size(), DType::kInt8, ReduceOp::kSum);
  CHECK(a == std::vector<int8_t>{127, -128, -4, -4});
  kernels::apply_postscale(a.data(), a.size(), DType::kInt8, ReduceOp::kAverage, 3, 1.0);
  CHECK(a == std::vector<int8_t>{42, -42, -1, -1});  // truncated toward zero
  std::vector<int16_t> c = {30000, -5}, d = {2767, 9};
  kernels::reduce_into(c.data(), d.data(), c.size(), DType::kInt16, ReduceOp::kMax);
  CHECK(c == std::vector<int16_t>{30000, 9});
  kernels::reduce_into(c.data(), d.data(), c.size(), DType::kInt16, ReduceOp::kSum);
  CHECK(c == std::vector<int16_t>{32767, 18});
}

TEST_CASE("an integer average over more ranks than the type can count divides correctly", "[kernels]") {
  // 256 ranks: the divisor does not fit uint8 (it was cast to 0 and divided by zero).
  std::vector<uint8_t> v = {255, 128, 0};
  kernels::apply_postscale(v.data(), v.size(), DType::kUInt8, ReduceOp::kAverage, 256, 1.0);
  CHECK(v == std::vector<uint8_t>{0, 0, 0});
  std::vector<int8_t> w = {127, -128};
  kernels::apply_postscale(w.data(), w.size(), DType::kInt8, ReduceOp::kAverage, 200, 1.0);
  CHECK(w == std::vector<int8_t>{0, 0});
}

// ops/gpu kernels against the CPU reference (kernels/cpu_reduce.h, kolo/tensor.h conversions):
// results must match bit for bit. Needs a GPU (run with --needs-gpu).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "kolo/tensor.h"
#include "kernels/cpu_reduce.h"
#include "ops/gpu/kernels.h"
#include "test/gpu/gpu_test_util.h"

namespace kg = kolo::ops::gpu;
using kolo::DType;
using kolo::ReduceOp;
using kolo::test::DeviceMem;

namespace {

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng() & 0xff);
  return v;
}

// Runs one batched copy of `descs` (host-side pointers already on the device).
void batched_copy(std::vector<kg::CopyDesc> descs) {
  const uint64_t chunks = kg::plan_batched_copy(descs);
  DeviceMem d(descs.size() * sizeof(kg::CopyDesc));
  d.upload(descs.data());
  CUDA_REQUIRE(kg::launch_batched_copy(reinterpret_cast<const kg::CopyDesc*>(d.get()), static_cast<int>(descs.size()),
                                       chunks, nullptr));
  CUDA_REQUIRE(cudaDeviceSynchronize());
}

// `count` values of `t` that a scale or an average keeps in range (uint8 stays small).
std::vector<std::byte> sample_values(DType t, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> buf(count * kolo::dtype_size(t));
  for (size_t i = 0; i < count; ++i) {
    const double v = t == DType::kUInt8  ? static_cast<double>(rng() % 80)
                     : t == DType::kInt8 ? static_cast<double>(rng() % 61) - 30.0
                                         : (static_cast<double>(rng() % 20001) - 10000.0) / (is_floating(t) ? 64.0 : 1.0);
    void* p = buf.data() + i * kolo::dtype_size(t);
    switch (t) {
      case DType::kUInt8: *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v); break;
      case DType::kInt8: *static_cast<int8_t*>(p) = static_cast<int8_t>(v); break;
      case DType::kInt16: *static_cast<int16_t*>(p) = static_cast<int16_t>(v); break;
      case DType::kBool: *static_cast<uint8_t*>(p) = v > 0; break;
      case DType::kInt32: *static_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
      case DType::kInt64: *static_cast<int64_t*>(p) = static_cast<int64_t>(v) * 100003; break;
      case DType::kFloat16: *static_cast<kolo::Half*>(p) = kolo::float_to_half(static_cast<float>(v)); break;
      case DType::kBFloat16: *static_cast<kolo::BFloat16*>(p) = kolo::float_to_bf16(static_cast<float>(v)); break;
      case DType::kFloat32: *static_cast<float*>(p) = static_cast<float>(v); break;
      case DType::kFloat64: *static_cast<double*>(p) = v / 3.0; break;
    }
  }
  return buf;
}

// Every dtype that can be scaled (bools cannot: refused at submission).
const std::vector<DType> kAllDTypes = {DType::kUInt8,   DType::kInt8,     DType::kInt16,   DType::kInt32, DType::kInt64,
                                       DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64};

}  // namespace

TEST_CASE("batched copy moves every range of mixed sizes and alignments in one launch", "[kernels]") {
  // Sizes around the 64 KiB chunk and word boundaries, at offsets that force each word size.
  const std::vector<size_t> sizes = {0, 1, 3, 17, 4096, 65535, 65536, 65537, 300001, 2, 16, 1000};
  const std::vector<size_t> src_shift = {0, 1, 2, 4, 8, 0, 16, 3, 0, 1, 8, 6};
  const std::vector<size_t> dst_shift = {0, 1, 2, 4, 8, 0, 16, 5, 3, 1, 0, 6};
  size_t total = 0;
  for (size_t s : sizes) total += s + 32;
  const auto src_host = random_bytes(total, 1);
  std::vector<std::byte> dst_host(total, std::byte{0xab});
  DeviceMem src(total), dst(total);
  src.upload(src_host.data());
  dst.upload(dst_host.data());
  std::vector<kg::CopyDesc> descs;
  std::vector<size_t> src_at, dst_at;
  size_t at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    src_at.push_back(at + src_shift[i]);
    dst_at.push_back(at + dst_shift[i]);
    descs.push_back({src.get() + src_at[i], dst.get() + dst_at[i], sizes[i], 0});
    at += sizes[i] + 32;
  }
  batched_copy(descs);
  const auto out = dst.download();
  std::vector<std::byte> expect(total, std::byte{0xab});
  for (size_t i = 0; i < sizes.size(); ++i)
    std::memcpy(expect.data() + dst_at[i], src_host.data() + src_at[i], sizes[i]);
  REQUIRE(out == expect);  // copied ranges right, and nothing outside them touched
}

TEST_CASE("batched copy of thousands of tiny tensors (the fusion case) is exact", "[kernels]") {
  const size_t n = 5000;
  std::mt19937 rng(7);
  std::vector<size_t> sizes(n);
  size_t total = 0;
  for (auto& s : sizes) total += (s = 1 + rng() % 96);
  const auto src_host = random_bytes(total, 2);
  DeviceMem src(total), dst(total);
  src.upload(src_host.data());
  CUDA_REQUIRE(cudaMemset(dst.get(), 0, total));
  // Reverse the order in the destination so a descriptor mix-up cannot go unnoticed.
  std::vector<kg::CopyDesc> descs;
  size_t s_at = 0, d_at = total;
  for (size_t s : sizes) {
    d_at -= s;
    descs.push_back({src.get() + s_at, dst.get() + d_at, s, 0});
    s_at += s;
  }
  batched_copy(descs);
  const auto out = dst.download();
  s_at = 0;
  d_at = total;
  for (size_t s : sizes) {
    d_at -= s;
    REQUIRE(std::memcmp(out.data() + d_at, src_host.data() + s_at, s) == 0);
    s_at += s;
  }
}

TEST_CASE("scale matches the CPU scale_copy bit for bit for every dtype", "[kernels]") {
  const size_t count = 100003;  // odd, > one block
  for (DType t : kAllDTypes) {
    for (double f : {0.5, 3.0, 1.0 / 3.0, -1.25}) {
      if (t == DType::kUInt8 && f < 0) continue;  // negative uint8 is out of range on CPU too
      INFO(kolo::dtype_name(t) << " x " << f);
      auto host = sample_values(t, count, 11);
      DeviceMem d(host.size());
      d.upload(host.data());
      CUDA_REQUIRE(kg::launch_scale(d.get(), count, t, f, nullptr));
      kolo::ops::scale_copy(host.data(), host.data(), count, t, f);
      REQUIRE(d.download() == host);
    }
  }
}

TEST_CASE("postscale (average, postscale) matches the CPU apply_postscale bit for bit", "[kernels]") {
  const size_t count = 4099;
  for (DType t : kAllDTypes) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
      for (int ranks : {1, 3, 4}) {
        for (double post : {1.0, 0.5, 2.0}) {
          INFO(kolo::dtype_name(t) << " " << kolo::reduce_op_name(op) << " ranks " << ranks << " post " << post);
          auto host = sample_values(t, count, 5);
          DeviceMem d(host.size());
          d.upload(host.data());
          CUDA_REQUIRE(kg::launch_postscale(d.get(), count, t, op, ranks, post, nullptr));
          kolo::ops::apply_postscale(host.data(), count, t, op, ranks, post);
          REQUIRE(d.download() == host);
        }
      }
    }
  }
}

TEST_CASE("fp16/bf16 <-> fp32 casts round like the CPU conversions", "[kernels]") {
  std::vector<float> in = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65520.0f, 1e6f, 6.1e-5f, 5.96e-8f, 1e-8f,
                           1.0009765625f /* half tie */, 3.14159265f, 1.00390625f /* bf16 tie */, -1e30f};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
  for (int i = 0; i < 10000; ++i) in.push_back(u(rng) / static_cast<float>(1 << (i % 24)));
  const size_t n = in.size();
  DeviceMem src(n * 4), bits(n * 2), back(n * 4);
  src.upload(in.data());
  std::vector<uint16_t> got_bits(n);
  std::vector<float> got_back(n);

  CUDA_REQUIRE(kg::launch_float_to_half(reinterpret_cast<const float*>(src.get()), reinterpret_cast<uint16_t*>(bits.get()), n, nullptr));
  CUDA_REQUIRE(kg::launch_half_to_float(reinterpret_cast<const uint16_t*>(bits.get()), reinterpret_cast<float*>(back.get()), n, nullptr));
  bits.download(got_bits.data());
  back.download(got_back.data());
  for (size_t i = 0; i < n; ++i) {
    INFO("fp16 of " << in[i]);
    REQUIRE(got_bits[i] == kolo::float_to_half(in[i]).bits);
    REQUIRE(got_back[i] == kolo::half_to_float(kolo::Half{got_bits[i]}));
  }

  CUDA_REQUIRE(kg::launch_float_to_bf16(reinterpret_cast<const float*>(src.get()), reinterpret_cast<uint16_t*>(bits.get()), n, nullptr));
  CUDA_REQUIRE(kg::launch_bf16_to_float(reinterpret_cast<const uint16_t*>(bits.get()), reinterpret_cast<float*>(back.get()), n, nullptr));
  bits.download(got_bits.data());
  back.download(got_back.data());
  for (size_t i = 0; i < n; ++i) {
    INFO("bf16 of " << in[i]);
    REQUIRE(got_bits[i] == kolo::float_to_bf16(in[i]).bits);
    REQUIRE(got_back[i] == kolo::bf16_to_float(kolo::BFloat16{got_bits[i]}));
  }
}

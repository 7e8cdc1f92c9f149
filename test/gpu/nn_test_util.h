// Helpers for the GPU trainer's tests: a CPU reference layer and its GPU twin built side by
// side with the same parameter values, random tensors, and a tolerance check that names
// the worst element. Comparisons are relative to the reference's largest magnitude, since
// cuDNN and cuBLAS sum in other orders than the CPU code (and TF32 is turned off by the
// tests' environment, NVIDIA_TF32_OVERRIDE=0).
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "nn/gpu/layer.h"
#include "nn/layer.h"
#include "nn/random.h"

namespace kolo::test {

inline nn::Tensor random_tensor(const nn::Dims& shape, uint64_t seed) {
  nn::Tensor t(shape);
  nn::Rng rng(seed);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(rng.normal());
  return t;
}

// REQUIRES every element of `got` within tol * max(1, max|want|) of `want`.
inline void require_close(const float* got, const float* want, size_t n, double tol, const std::string& what) {
  double scale = 1.0, worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (d > worst) {
      worst = d;
      at = i;
    }
  }
  INFO(what << ": worst element " << at << " of " << n << ": got " << (n ? got[at] : 0.0f) << ", want "
            << (n ? want[at] : 0.0f) << " (scale " << scale << ")");
  REQUIRE(worst <= tol * scale);
}

inline void require_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                          const std::string& what) {
  REQUIRE(got.size() == want.size());
  require_close(got.data(), want.data(), got.size(), tol, what);
}

// A CPU layer and its GPU twin with identical parameters and buffers.
struct LayerPair {
  nn::ParamStore cpu_params{true}, cpu_buffers{false};
  nn::Rng rng{7};
  std::unique_ptr<nn::gpu::GpuContext> ctx;
  std::unique_ptr<nn::gpu::DeviceParams> gpu_params, gpu_buffers;
  std::unique_ptr<nn::Layer> cpu;
  std::unique_ptr<nn::gpu::GpuLayer> gpu;
  nn::Dims out;

  LayerPair(std::unique_ptr<nn::Layer> c, std::unique_ptr<nn::gpu::GpuLayer> g, const nn::Dims& in)
      : ctx(std::make_unique<nn::gpu::GpuContext>(0)),
        gpu_params(std::make_unique<nn::gpu::DeviceParams>(true)),
        gpu_buffers(std::make_unique<nn::gpu::DeviceParams>(false)),
        cpu(std::move(c)),
        gpu(std::move(g)) {
    nn::BuildContext bc{&cpu_params, &cpu_buffers, &rng, ""};
    out = cpu->setup(in, bc);
    cpu_params.finalize();
    cpu_buffers.finalize();
    nn::Rng init(11);
    cpu->init(init);
    nn::gpu::GpuBuildContext gc{ctx.get(), gpu_params.get(), gpu_buffers.get(), ""};
    REQUIRE(gpu->setup(in, gc) == out);
    gpu_params->finalize();
    gpu_buffers->finalize();
    gpu_params->upload_values(cpu_params.values().data(), ctx->stream());
    gpu_buffers->upload_values(cpu_buffers.values().data(), ctx->stream());
  }

  std::vector<float> gpu_grads() {
    std::vector<float> g(gpu_params->total_size());
    if (!g.empty())
      REQUIRE(cudaMemcpy(g.data(), gpu_params->grads(), g.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    return g;
  }
  std::vector<float> gpu_buffer_values() {
    std::vector<float> b(gpu_buffers->total_size());
    gpu_buffers->download_values(b.data(), ctx->stream());
    return b;
  }
};

}  // namespace kolo::test

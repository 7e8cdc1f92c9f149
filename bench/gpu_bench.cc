// kolo-bench-gpu — the GPU path's two overheads, each beside its baseline in the same run:
//   1. pack/unpack: ONE batched-copy launch moving N tensors into a fusion buffer, vs one
//      device-to-device cudaMemcpy of the same bytes (target: >= 80% of its bandwidth);
//   2. NcclExecutor allreduce (what the coordinator calls) vs raw ncclAllReduce on the same
//      buffer, communicator and stream (target at np 1: <= 1.05x), one tensor in place and
//      the ResNet-50 gradient set fused (there the executor also packs and unpacks).
// Without a GPU it prints "no GPU found" and exits 0. Timings are the median over --iters.
//   [mpirun -np 1] build/bench/kolo-bench-gpu [--iters N] [--csv FILE]
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/handle_state.h"
#include "ops/gpu/kernels.h"
#include "ops/gpu/nccl_executor.h"
#include "workloads.h"

namespace {

namespace kg = kolo::ops::gpu;

#define BENCH_CUDA(expr)                                                                  \
  do {                                                                                    \
    const cudaError_t _e = (expr);                                                        \
    if (_e != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s failed: %s\n", #expr, cudaGetErrorString(_e));             \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

void check(const kolo::Status& s) {
  if (!s.is_ok()) {
    std::fprintf(stderr, "kolo: %s\n", s.message().c_str());
    std::exit(1);
  }
}

// Median milliseconds of `body` over `iters` runs (after 3 warm-up runs), measured on the
// host around a body that itself returns only when its GPU work is done. Collective bodies
// start each run together on all ranks (`together`).
double median_ms(int iters, const std::function<void()>& body, bool together = true) {
  std::vector<double> t;
  for (int i = 0; i < iters + 3; ++i) {
    if (together) MPI_Barrier(MPI_COMM_WORLD);
    const auto a = std::chrono::steady_clock::now();
    body();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
    if (i >= 3) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Csv {
  FILE* f = nullptr;
  void row(const std::string& what, size_t bytes, int tensors, double kolo_ms, double base_ms) {
    if (f) std::fprintf(f, "%s,%zu,%d,%.6f,%.6f\n", what.c_str(), bytes, tensors, kolo_ms, base_ms);
  }
};

// Element counts of `n` tensors totalling about `total_bytes` of fp32, or ResNet-50's.
std::vector<size_t> tensor_counts(const std::string& set, size_t n, size_t total_bytes) {
  std::vector<size_t> c;
  if (set == "resnet50") {
    for (const auto& g : kolo::bench::resnet50_gradients()) {
      size_t e = 1;
      for (int64_t d : g.shape) e *= static_cast<size_t>(d);
      c.push_back(e);
    }
  } else {
    c.assign(n, total_bytes / 4 / n);
  }
  return c;
}

void bench_pack(int iters, Csv& csv) {
  std::printf("\n# pack: one batched-copy launch vs one cudaMemcpy D2D of the same bytes\n");
  std::printf("%-10s %8s %12s %12s %12s %8s\n", "set", "tensors", "bytes", "pack GB/s", "memcpy GB/s", "ratio");
  struct Case { const char* set; size_t n; size_t bytes; };
  for (const Case& k : {Case{"uniform", 1, 64u << 20}, Case{"uniform", 64, 64u << 20}, Case{"uniform", 1024, 4u << 20},
                        Case{"uniform", 4096, 16u << 20}, Case{"resnet50", 0, 0}}) {
    const auto counts = tensor_counts(k.set, k.n, k.bytes);
    size_t total = 0;
    for (size_t c : counts) total += c * 4;
    void *src = nullptr, *dst = nullptr, *descs_dev = nullptr;
    BENCH_CUDA(cudaMalloc(&src, total));
    BENCH_CUDA(cudaMalloc(&dst, total));
    std::vector<kg::CopyDesc> descs;
    size_t at = 0;
    for (size_t c : counts) {
      descs.push_back({static_cast<char*>(src) + at, static_cast<char*>(dst) + at, c * 4, 0});
      at += c * 4;
    }
    const uint64_t chunks = kg::plan_batched_copy(descs);
    BENCH_CUDA(cudaMalloc(&descs_dev, descs.size() * sizeof(kg::CopyDesc)));
    BENCH_CUDA(cudaMemcpy(descs_dev, descs.data(), descs.size() * sizeof(kg::CopyDesc), cudaMemcpyHostToDevice));
    const double pack = median_ms(iters, [&] {
      BENCH_CUDA(kg::launch_batched_copy(static_cast<const kg::CopyDesc*>(descs_dev), static_cast<int>(descs.size()), chunks, nullptr));
      BENCH_CUDA(cudaDeviceSynchronize());
    }, false);
    const double copy = median_ms(iters, [&] {
      BENCH_CUDA(cudaMemcpyAsync(dst, src, total, cudaMemcpyDeviceToDevice, nullptr));
      BENCH_CUDA(cudaDeviceSynchronize());
    }, false);
    std::printf("%-10s %8zu %12zu %12.1f %12.1f %8.2f\n", k.set, counts.size(), total, total / pack / 1e6,
                total / copy / 1e6, copy / pack);
    csv.row(std::string("pack.") + k.set, total, static_cast<int>(counts.size()), pack, copy);
    cudaFree(src);
    cudaFree(dst);
    cudaFree(descs_dev);
  }
}

// The entries and response the coordinator would hand the executor for `counts` fp32
// tensors laid out back to back at `base`.
struct Work {
  kolo::Response response;
  std::vector<kolo::TensorEntry> entries;
};

Work make_work(void* base, const std::vector<size_t>& counts, int device) {
  Work w;
  w.response.type = kolo::Response::Type::kAllreduce;
  w.response.dtype = kolo::DType::kFloat32;
  w.response.reduce_op = kolo::ReduceOp::kSum;
  w.response.device = kolo::Device::gpu(device);
  size_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    std::string name = "t";
    name += std::to_string(i);  // (operator+ here trips a false -Wrestrict in GCC 12)
    kolo::TensorEntry e;
    e.view = kolo::TensorView{static_cast<char*>(base) + at, kolo::DType::kFloat32, {static_cast<int64_t>(counts[i])}};
    e.view.device = kolo::Device::gpu(device);
    e.request.name = name;
    e.handle = std::make_shared<kolo::detail::HandleState>(name, kolo::OpKind::kAllreduce);
    w.response.names.push_back(name);
    w.response.sizes.push_back(static_cast<int64_t>(counts[i]));
    w.entries.push_back(std::move(e));
    at += counts[i] * 4;
  }
  return w;
}

void bench_allreduce(int iters, int device, Csv& csv) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  kg::NcclExecutor exec(MPI_COMM_WORLD);
  check(exec.ensure_comm(device));
  std::printf("\n# allreduce fp32 sum, %d rank(s): NcclExecutor::execute vs raw ncclAllReduce (same comm, stream)\n", size);
  std::printf("%-10s %8s %12s %12s %12s %8s %10s %10s\n", "set", "tensors", "bytes", "kolo ms", "raw ms", "ratio",
              "algbw GB/s", "busbw GB/s");
  struct Case { const char* set; size_t n; size_t bytes; };
  for (const Case& k : {Case{"one", 1, 4u << 10}, Case{"one", 1, 1u << 20}, Case{"one", 1, 64u << 20},
                        Case{"one", 1, 256u << 20}, Case{"uniform", 64, 4u << 20}, Case{"resnet50", 0, 0}}) {
    const auto counts = tensor_counts(k.set, k.n, k.bytes);
    size_t total = 0;
    for (size_t c : counts) total += c;
    void* buf = nullptr;
    BENCH_CUDA(cudaMalloc(&buf, total * 4));
    BENCH_CUDA(cudaMemset(buf, 0, total * 4));
    Work w = make_work(buf, counts, device);
    const double kolo_ms = median_ms(iters, [&] { check(exec.execute(w.response, w.entries)); });
    const double raw_ms = median_ms(iters, [&] {
      if (ncclAllReduce(buf, buf, total, ncclFloat32, ncclSum, exec.comm(), exec.stream()) != ncclSuccess) std::exit(1);
      BENCH_CUDA(cudaStreamSynchronize(exec.stream()));
    });
    const double algbw = total * 4 / raw_ms / 1e6;
    std::printf("%-10s %8zu %12zu %12.4f %12.4f %8.3f %10.1f %10.1f\n", k.set, counts.size(), total * 4, kolo_ms, raw_ms,
                kolo_ms / raw_ms, algbw, algbw * 2.0 * (size - 1) / size);
    csv.row(std::string("allreduce.") + k.set, total * 4, static_cast<int>(counts.size()), kolo_ms, raw_ms);
    cudaFree(buf);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no GPU found: nothing to measure\n");
    return 0;
  }
  int iters = 50;
  const char* csv_path = nullptr;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters")) iters = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--csv")) csv_path = argv[i + 1];
  }
  MPI_Init(&argc, &argv);
  int rank = 0, local_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank);
  const int device = local_rank % count;
  BENCH_CUDA(cudaSetDevice(device));
  Csv csv;
  if (rank == 0 && csv_path) {
    csv.f = std::fopen(csv_path, "w");
    if (csv.f) std::fprintf(csv.f, "what,bytes,tensors,kolo_ms,baseline_ms\n");
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, device);
  if (rank == 0) std::printf("kolo-bench-gpu on %s, median of %d iterations\n", prop.name, iters);
  if (rank == 0) bench_pack(iters, csv);  // one GPU's kernels: rank 0 alone, the others wait
  MPI_Barrier(MPI_COMM_WORLD);
  bench_allreduce(iters, device, csv);
  if (csv.f) std::fclose(csv.f);
  MPI_Comm_free(&local);
  MPI_Finalize();
  return 0;
}

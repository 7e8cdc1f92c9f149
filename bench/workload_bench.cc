// Workload mode of kolo-bench-allreduce: a real model's gradient set per step.
#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "kolo/kolo.h"
#include "workloads.h"

namespace {

struct WorkloadOptions {
  std::string name;
  int warmup, iters;
  kolo::DType dtype;  // float32, or float16 / bfloat16 (gradients kept in 16 bits)
};

// 1.0 in `t` (float32 or a 16-bit float), as raw bits.
uint32_t one_bits(kolo::DType t) {
  if (t == kolo::DType::kFloat16) return kolo::float_to_half(1.0f).bits;
  if (t == kolo::DType::kBFloat16) return kolo::float_to_bf16(1.0f).bits;
  return 0x3f800000u;
}

// Sets `n` elements of `t` at p to 1.0.
void fill_ones(void* p, int64_t n, kolo::DType t) {
  if (t == kolo::DType::kFloat32) {
    std::fill(static_cast<float*>(p), static_cast<float*>(p) + n, 1.0f);
    return;
  }
  const auto b = static_cast<uint16_t>(one_bits(t));
  std::fill(static_cast<uint16_t*>(p), static_cast<uint16_t*>(p) + n, b);
}

bool is_one(const void* p, int64_t i, kolo::DType t) {
  if (t == kolo::DType::kFloat32) return static_cast<const float*>(p)[i] == 1.0f;
  return static_cast<const uint16_t*>(p)[i] == one_bits(t);
}

void print_row(const char* what, const kolo::bench::Stats& s, double best_ms) {
  std::printf("  %-46s min %9.3f ms  median %9.3f ms", what, s.min_ms, s.median_ms);
  if (best_ms > 0) std::printf("   %.2fx the faster baseline (medians)", s.median_ms / best_ms);
  std::printf("\n");
}

int run(const WorkloadOptions& o) {
  const auto set = kolo::bench::workload_by_name(o.name);
  const int64_t total = kolo::bench::total_elements(set);
  const size_t esize = kolo::dtype_size(o.dtype);
  // One contiguous gradient buffer with a view per tensor, as the trainer keeps them. The
  // MPI baselines reduce float32 (MPI has no 16-bit float type): with --dtype float16 they
  // are what a program without 16-bit gradients would do, with twice the bytes.
  std::vector<float> flat(static_cast<size_t>(total), 1.0f);
  std::vector<std::byte> grads(static_cast<size_t>(total) * esize);
  fill_ones(grads.data(), total, o.dtype);
  std::vector<kolo::TensorView> mpi_views, views;
  for (size_t i = 0, off = 0; i < set.size(); ++i) {
    mpi_views.push_back(kolo::TensorView::of(flat.data() + off, set[i].shape));
    views.push_back(kolo::TensorView{grads.data() + off * esize, o.dtype, set[i].shape});
    off += static_cast<size_t>(views.back().num_elements());
  }
  if (kolo::rank() == 0)
    std::printf("# workload %s: %zu tensors, %lld %s values (%.1f MB), %d ranks, average\n", o.name.c_str(),
                set.size(), static_cast<long long>(total), std::string(kolo::dtype_name(o.dtype)).c_str(),
                static_cast<double>(total) * static_cast<double>(esize) / 1e6, kolo::size());

  // The same views over kolo's shared memory (kolo/memory.h): the zero-copy path. Every
  // rank allocates alike, so the tensors lie at the same offsets everywhere; all ranks get
  // the memory or none does.
  std::string why;
  auto* shared = static_cast<std::byte*>(
      kolo::allocate_shared_everywhere(static_cast<size_t>(total) * esize, "bench.workload.shared", &why));
  const bool zero_copy = shared != nullptr;
  std::vector<kolo::TensorView> shared_views;
  for (size_t i = 0, off = 0; zero_copy && i < set.size(); ++i) {
    shared_views.push_back(kolo::TensorView{shared + off * esize, o.dtype, set[i].shape});
    off += static_cast<size_t>(shared_views.back().num_elements());
  }

  std::vector<kolo::Handle> handles(set.size());
  const auto kolo_step = [&](const std::vector<kolo::TensorView>& vs) {
    for (size_t i = 0; i < set.size(); ++i)
      handles[i] = kolo::allreduce_async(vs[i], set[i].name, {kolo::ReduceOp::kAverage});
    for (auto& h : handles) kolo::synchronize(h);
  };
  std::vector<std::function<void()>> bodies = {
      [&] {
        for (auto& v : mpi_views)
          MPI_Allreduce(MPI_IN_PLACE, v.data, static_cast<int>(v.num_elements()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      },
      [&] { MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(total), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
      [&] { kolo_step(views); }};
  if (zero_copy) bodies.push_back([&] { kolo_step(shared_views); });
  // Every element starts at 1.0 on every rank, and kolo's average gives 1.0 again. Each kolo
  // run is checked right after it (before the buffers are refilled for the next body; the
  // MPI bodies sum, so the buffers' state at the end says nothing about kolo). The check
  // reads every tensor's first and last element and every 61st one: enough to catch a
  // misplaced or unreduced tensor, and quick, so the next body does not find kolo's
  // coordinator asleep for longer than it would be in training.
  std::vector<int64_t> probes;
  for (size_t i = 0, off = 0; i < set.size(); ++i) {
    const auto n = static_cast<int64_t>(views[i].num_elements());
    probes.push_back(static_cast<int64_t>(off));
    if (n > 1) probes.push_back(static_cast<int64_t>(off) + n - 1);
    off += static_cast<size_t>(n);
  }
  for (int64_t i = 0; i < total; i += 61) probes.push_back(i);
  std::vector<const std::byte*> kolo_result(bodies.size(), nullptr);  // by body: kolo's output, or none
  kolo_result[2] = grads.data();
  if (zero_copy) kolo_result[3] = shared;
  size_t wrong = 0;
  size_t last = bodies.size();  // the body that ran last; none yet
  const auto check_last = [&] {
    if (last < bodies.size() && kolo_result[last] != nullptr)
      for (int64_t i : probes) wrong += !is_one(kolo_result[last], i, o.dtype);
  };
  const auto before = kolo::runtime_stats();
  auto st = kolo::bench::measure(o.warmup, o.iters, bodies, [&](size_t next) {
    check_last();
    last = next;
    std::fill(flat.begin(), flat.end(), 1.0f);
    fill_ones(grads.data(), total, o.dtype);
    if (zero_copy) fill_ones(shared, total, o.dtype);
  });
  check_last();
  const auto after = kolo::runtime_stats();
  const int steps = o.warmup + o.iters;
  if (kolo::rank() == 0) {
    const double best = std::min(st[0].median_ms, st[1].median_ms);
    print_row("(a) MPI_Allreduce per tensor", st[0], 0);
    print_row("(b) MPI_Allreduce of all bytes in one buffer", st[1], 0);
    print_row("kolo, every tensor named and async", st[2], best);
    if (zero_copy) print_row("kolo, same, gradients in allocate_shared", st[3], best);
    else std::printf("  (zero-copy row skipped: %s)\n", why.c_str());
    const double cycles = static_cast<double>(after.active_cycles - before.active_cycles);
    const double coord = after.coordination_seconds - before.coordination_seconds;
    const double exec = after.execution_seconds - before.execution_seconds;
    const double wait = after.rendezvous_seconds - before.rendezvous_seconds;
    std::printf("  kolo per step (rank 0): %.1f collectives after fusion for %zu tensors; coordinator's own work "
                "%.3f ms (%.1f us per active cycle, %.2f us per tensor), waiting for peers %.3f ms, executors "
                "%.3f ms; wrong elements: %zu\n",
                static_cast<double>(after.collectives - before.collectives) / steps, set.size(), coord * 1e3 / steps,
                cycles > 0 ? coord * 1e6 / cycles : 0.0, coord * 1e6 / steps / static_cast<double>(set.size()),
                wait * 1e3 / steps, exec * 1e3 / steps, wrong);
    // Issue #7: what the response cache saves shows in the coordinator's work above; run once
    // with KOLO_CACHE_CAPACITY=0 to compare. This line says which case this run was.
    const double by_id = static_cast<double>(after.peer_requests_cached - before.peer_requests_cached);
    const double full = static_cast<double>(after.peer_requests_full - before.peer_requests_full);
    std::printf("  response cache: capacity %llu; peers' requests per step: %.1f by cache id, %.1f in full\n",
                static_cast<unsigned long long>(after.cache_capacity), by_id / steps, full / steps);
  }
  return wrong ? 2 : 0;
}

}  // namespace

// Called by main() in allreduce_bench.cc (kept apart so each file holds one mode).
int run_workload_mode(const std::string& name, int warmup, int iters, kolo::DType dtype) {
  return run({name, warmup, iters, dtype});
}

// Before kolo::init(): unless KOLO_SHM_ARENA_BYTES is set, reserve enough shared memory for
// the workload's gradients (64-byte alignment per tensor and a page of slack) so that the
// zero-copy row runs.
void reserve_workload_shared_memory(const std::string& name) {
  if (std::getenv("KOLO_SHM_ARENA_BYTES") != nullptr) return;
  const auto set = kolo::bench::workload_by_name(name);
  // float32's 4 bytes per value also cover the 16-bit types.
  const auto bytes = static_cast<unsigned long long>(kolo::bench::total_elements(set)) * 4 + set.size() * 64 + 4096;
  setenv("KOLO_SHM_ARENA_BYTES", std::to_string(bytes).c_str(), 0);
}

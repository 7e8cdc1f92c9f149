// kolo-bench-core — the runtime's two headline numbers beside raw MPI in the same run:
//   1. one step of ResNet-50's 161 gradient tensors (25.6M fp32, 102 MB), each submitted as
//      its own named tensor, vs (a) one MPI_Allreduce per tensor and (b) one MPI_Allreduce
//      of all bytes in one buffer;
//   2. one 4 KB tensor, submit to completion, vs one MPI_Allreduce of 4 KB.
// Prints min and median over iterations and the ratio kolo / best baseline.
//   mpirun -np 2 build/bench/kolo-bench-core [--iters N]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "workloads.h"

namespace {

struct Stats {
  double min_ms, median_ms;
};

// Runs `body` `iters` times after `warmup` runs; every iteration starts together on all
// ranks, and its time is the slowest rank's.
Stats measure(int warmup, int iters, const std::function<void()>& body) {
  std::vector<double> t;
  for (int i = 0; i < warmup + iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto a = std::chrono::steady_clock::now();
    body();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
    double slowest = 0;
    MPI_Allreduce(&ms, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (i >= warmup) t.push_back(slowest);
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2]};
}

void row(const char* what, const Stats& s, double ref_median) {
  if (kolo::rank() != 0) return;
  std::printf("  %-44s min %9.3f ms  median %9.3f ms", what, s.min_ms, s.median_ms);
  if (ref_median > 0) std::printf("  (%.2fx of best baseline)", s.median_ms / ref_median);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  int iters = 20;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--iters")) iters = std::max(1, std::atoi(argv[i + 1]));

  const auto set = kolo::bench::resnet50_gradients();
  const int64_t total = kolo::bench::total_elements(set);
  std::vector<float> flat(static_cast<size_t>(total), 1.0f);
  std::vector<float*> ptr;
  std::vector<int> count;
  for (size_t i = 0, off = 0; i < set.size(); ++i) {
    int64_t e = 1;
    for (int64_t d : set[i].shape) e *= d;
    ptr.push_back(flat.data() + off);
    count.push_back(static_cast<int>(e));
    off += static_cast<size_t>(e);
  }
  if (kolo::rank() == 0)
    std::printf("kolo-bench-core: %d ranks; ResNet-50 gradients: %zu tensors, %lld values (%.1f MB)\n",
                kolo::size(), set.size(), static_cast<long long>(total), total * 4 / 1e6);

  Stats per_tensor = measure(2, iters, [&] {
    for (size_t i = 0; i < ptr.size(); ++i)
      MPI_Allreduce(MPI_IN_PLACE, ptr[i], count[i], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  });
  Stats one_buffer = measure(2, iters, [&] {
    MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(total), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  });
  std::vector<kolo::Handle> handles(set.size());
  Stats kolo_step = measure(2, iters, [&] {
    for (size_t i = 0; i < set.size(); ++i)
      handles[i] = kolo::allreduce_async(kolo::TensorView::of(ptr[i], set[i].shape), set[i].name,
                                         {kolo::ReduceOp::kSum});
    for (auto& h : handles) kolo::synchronize(h);
  });
  const double best = std::min(per_tensor.median_ms, one_buffer.median_ms);
  if (kolo::rank() == 0) std::printf("ResNet-50 gradient step (fp32, sum):\n");
  row("MPI_Allreduce per tensor (baseline a)", per_tensor, 0);
  row("MPI_Allreduce of one 102 MB buffer (baseline b)", one_buffer, 0);
  row("kolo, 161 named tensors", kolo_step, best);

  std::vector<float> small(1024, 1.0f);
  const int small_iters = iters * 100;
  Stats mpi_small = measure(50, small_iters, [&] {
    MPI_Allreduce(MPI_IN_PLACE, small.data(), 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  });
  Stats kolo_small = measure(50, small_iters, [&] {
    kolo::allreduce(kolo::TensorView::of(small), "small", {kolo::ReduceOp::kSum});
  });
  if (kolo::rank() == 0) std::printf("One 4 KB tensor, submit to completion:\n");
  row("MPI_Allreduce 4 KB (baseline)", mpi_small, 0);
  row("kolo allreduce 4 KB", kolo_small, mpi_small.median_ms);
  kolo::shutdown();
  return 0;
}

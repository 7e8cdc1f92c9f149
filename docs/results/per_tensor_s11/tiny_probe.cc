// The tiny-burst probe of docs/benchmarks.md (issue #17, sessions 10-11): 1,000 named async
// allreduces of 4 KB, synchronize on each, then (with a second argument) one 4 MB MPI_Allreduce
// of the same buffer in the same loop. Build: mpicxx -O2 -std=c++20 -Iinclude tiny_probe.cc
// -Lbuild -lkolo -Wl,-rpath,$PWD/build; run: mpirun -np 2 ./a.out 400 mpi
#include <mpi.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "kolo/kolo.h"
#include "kolo/runtime.h"
int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  int iters = std::atoi(argv[1]);
  bool do_mpi = argc > 2;
  const int n = 1000; const int e = 1024;
  std::vector<float> buf(size_t(n) * e, 1.0f);
  std::vector<std::string> names; for (int i = 0; i < n; ++i) names.push_back("tiny." + std::to_string(i));
  std::vector<kolo::Handle> h(n);
  std::vector<double> t, tm, ts;
  auto s0 = kolo::runtime_stats();
  for (int it = 0; it < iters; ++it) {
    std::fill(buf.begin(), buf.end(), 1.0f);
    MPI_Barrier(MPI_COMM_WORLD);
    auto a = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) h[i] = kolo::allreduce_async(kolo::TensorView{buf.data() + size_t(i) * e, kolo::DType::kFloat32, {e}}, names[i], {kolo::ReduceOp::kAverage});
    ts.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    for (auto& x : h) kolo::synchronize(x);
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    if (do_mpi) {
      std::fill(buf.begin(), buf.end(), 1.0f);
      MPI_Barrier(MPI_COMM_WORLD);
      a = std::chrono::steady_clock::now();
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), n * e, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      tm.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    }
  }
  auto s1 = kolo::runtime_stats();
  std::sort(t.begin(), t.end()); std::sort(ts.begin(), ts.end()); std::sort(tm.begin(), tm.end());
  double mm = do_mpi ? tm[tm.size()/2] : 0;
  std::printf("rank %d tiny: submit %.3f ms; kolo median %.3f ms min %.3f; mpi 4MB median %.3f -> %.2fx; per step: coord %.3f ms exec %.3f ms, %.1f collectives, helped %.0f%%, fast %.0f\n",
    kolo::rank(), ts[ts.size()/2], t[t.size()/2], t[0], mm, mm > 0 ? t[t.size()/2] / mm : 0, (s1.coordination_seconds - s0.coordination_seconds)*1e3/iters,
    (s1.execution_seconds - s0.execution_seconds)*1e3/iters, double(s1.collectives - s0.collectives)/iters,
    100.0 * double(s1.helped_passes - s0.helped_passes) / double(s1.active_cycles - s0.active_cycles + 1), double(s1.fast_collectives - s0.fast_collectives)/iters);
  kolo::shutdown();
}

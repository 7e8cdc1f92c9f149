// h2 s13: stage timestamps of a lone allreduce (needs the instrumented libkolo: kolo_probe_ts).
#include <mpi.h>
#include <x86intrin.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "kolo/kolo.h"
extern "C" uint64_t kolo_probe_ts[16];
int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  const int iters = std::atoi(argv[1]);
  const int e = std::atoi(argv[2]);
  std::vector<float> buf(e, 1.0f);
  const int order[] = {1, 2, 3, 11, 4, 5, 6, 8, 9, 12, 13, 10};
  const char* label[] = {"pushed", "wait", "taken", "publish0", "published", "resolved", "exec0", "exec1", "completed", "pass_end", "help_exit", "woken"};
  const int ns = 12;
  std::vector<std::vector<double>> d(ns);
  std::vector<double> tot, mpi;
  auto c0 = std::chrono::steady_clock::now(); uint64_t r0 = __rdtsc();
  for (int it = 0; it < iters; ++it) {
    for (auto& x : kolo_probe_ts) x = 0;
    uint64_t a = __rdtsc();
    kolo::allreduce(kolo::TensorView{buf.data(), kolo::DType::kFloat32, {e}}, "lone", {kolo::ReduceOp::kSum});
    uint64_t b = __rdtsc();
    tot.push_back(double(b - a));
    for (int s = 0; s < ns; ++s) { uint64_t t = kolo_probe_ts[order[s]]; d[s].push_back(t ? double(int64_t(t - a)) : -1); }
    a = __rdtsc();
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), e, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    mpi.push_back(double(__rdtsc() - a));
    if (it % 64 == 0) std::fill(buf.begin(), buf.end(), 1.0f);
  }
  double ns_per = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - c0).count() / double(__rdtsc() - r0);
  auto med = [&](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2] * ns_per / 1000; };
  std::printf("rank %d %d B: kolo median %.2f us, mpi %.2f us -> %.2fx | stage medians (us from submit):", kolo::rank(), e * 4, med(tot), med(mpi), med(tot) / med(mpi));
  for (int s = 0; s < ns; ++s) std::printf(" %s %.2f", label[s], med(d[s]));
  std::printf("\n");
  kolo::shutdown();
}

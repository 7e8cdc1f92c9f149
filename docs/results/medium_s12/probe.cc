// h3 s12 probe: bench-like loop (fill, barrier, one body) for one size; kolo and MPI shuffled.
// Per kolo call: whether a waiter ran the pass (helped_passes delta). Per thread: ctx switches.
#include <mpi.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <random>
#include <string>
#include <vector>
#include "kolo/kolo.h"
#include "kolo/runtime.h"
static void threads(const char* tag) {
  DIR* d = opendir("/proc/self/task"); dirent* e;
  while ((e = readdir(d))) { if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/schedstat"); unsigned long long run, wait, n; f >> run >> wait >> n;
    std::printf("r%d %s tid %s run %.1f ms wait %.1f ms slices %llu\n", kolo::rank(), tag, e->d_name, run / 1e6, wait / 1e6, n); }
  closedir(d);
}
int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  size_t bytes = std::strtoul(argv[1], nullptr, 0); int iters = std::atoi(argv[2]);
  size_t n = bytes / 4; std::vector<float> buf(n);
  std::vector<double> tk, tm, th, tc; std::vector<std::pair<long long,long long>> spans; std::vector<int> kinds;
  auto fill = [&] { for (size_t i = 0; i < n; ++i) buf[i] = float(i % 7 + kolo::rank()); };
  threads("before");
  auto s0 = kolo::runtime_stats();
  for (int it = 0; it < iters + 50; ++it) {
    std::mt19937 rng(it * 2654435761u + 1u); int first = rng() & 1;
    for (int k = 0; k < 2; ++k) {
      int b = k ^ first; fill(); MPI_Barrier(MPI_COMM_WORLD);
      auto h0 = kolo::runtime_stats().helped_passes;
      auto a = std::chrono::steady_clock::now();
      if (b == 0) kolo::allreduce(kolo::TensorView{buf.data(), kolo::DType::kFloat32, {int64_t(n)}}, "p", {});
      else MPI_Allreduce(MPI_IN_PLACE, buf.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      auto z = std::chrono::steady_clock::now(); if (it >= 50) { spans.push_back({a.time_since_epoch().count(), z.time_since_epoch().count()}); kinds.push_back(b); }
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
      bool helped = kolo::runtime_stats().helped_passes > h0;
      double mx; MPI_Allreduce(&us, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (it < 50) continue;
      if (b == 0) { tk.push_back(mx); (helped ? th : tc).push_back(mx); } else tm.push_back(mx);
    }
  }
  auto s1 = kolo::runtime_stats();
  auto med = [](std::vector<double> v) { if (v.empty()) return 0.0; std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  threads("after");
  std::printf("r%d bytes %zu kolo %.1f mpi %.1f ratio %.2f | helped calls %zu med %.1f, coord calls %zu med %.1f | passes %llu helped %llu\n",
              kolo::rank(), bytes, med(tk), med(tm), med(tk) / med(tm), th.size(), med(th), tc.size(), med(tc),
              (unsigned long long)(s1.active_cycles - s0.active_cycles), (unsigned long long)(s1.helped_passes - s0.helped_passes));
  if (getenv("SPANS")) { std::string fn = std::string(getenv("SPANS")) + std::to_string(kolo::rank()); FILE* f = fopen(fn.c_str(), "w"); for (size_t i = 0; i < spans.size(); ++i) fprintf(f, "%d %lld %lld\n", kinds[i], spans[i].first, spans[i].second); fclose(f); }
  kolo::shutdown();
}

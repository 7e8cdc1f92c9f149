#include "bench_util.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

namespace kolo::bench {

std::vector<Stats> measure(int warmup, int iters, const std::vector<std::function<void()>>& bodies,
                           const std::function<void(size_t)>& before) {
  std::vector<std::vector<double>> t(bodies.size());
  for (int i = 0; i < warmup + iters; ++i) {
    // Shuffled every round, alike on every rank (same seed): a body that follows another
    // finds the caches it evicted and the threads it let fall asleep (kolo's coordinator),
    // so no body may always come right after the same one.
    std::vector<size_t> order(bodies.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::mt19937 rng(static_cast<unsigned>(i) * 2654435761u + 1u);
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t b : order) {
      if (before) before(b);
      MPI_Barrier(MPI_COMM_WORLD);
      const auto a = std::chrono::steady_clock::now();
      bodies[b]();
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
      double slowest = 0;
      MPI_Allreduce(&ms, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (i >= warmup) t[b].push_back(slowest);
    }
  }
  std::vector<Stats> out;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    out.push_back(v.empty() ? Stats{} : Stats{v.front(), v[v.size() / 2]});
  }
  return out;
}

}  // namespace kolo::bench

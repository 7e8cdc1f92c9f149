// bench/bench_util.h — timing shared by kolo's benchmarks: interleaved, synchronised
// repetitions whose time is the slowest rank's, reduced to min/median.
#pragma once

#include <functional>
#include <vector>

namespace kolo::bench {

struct Stats {
  double min_ms = 0, median_ms = 0;
};

// Times each of `bodies` `iters` times after `warmup` rounds. The bodies run round-robin, so
// the noise of a shared machine falls on all of them alike, in an order shuffled every round
// (a body that follows another finds caches cold and kolo's coordinator asleep, so no body
// may always come right after the same one); each run starts together on all
// ranks (MPI_Barrier) and counts as the slowest rank's time. `before`, if set, runs
// untimed before every body (e.g. to refill buffers).
std::vector<Stats> measure(int warmup, int iters, const std::vector<std::function<void()>>& bodies,
                           const std::function<void(size_t body)>& before = nullptr);

}  // namespace kolo::bench

#include "floor.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <new>
#include <vector>

namespace kolo::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Spins until `line` holds `want`. Past a few thousand polls the peer is not running (both
// ranks share a CPU, as they may with more ranks than CPUs): yield it the CPU, or each hop
// would last a scheduler tick and the measurement minutes. Such a hop is slow either way;
// the median over batches drops it.
void await(const std::atomic<uint64_t>& line, uint64_t want) {
  for (int polls = 0; line.load(std::memory_order_acquire) != want;) {
    if (++polls > 4000) sched_yield();
  }
}

// Local ranks 0 and 1 pass a counter back and forth through one cache line of an MPI shared
// window: rank 0 writes odd values, rank 1 answers with the next even one. One round trip
// is two one-way hops; the median over batches damps a descheduled batch.
double ping_pong_us(MPI_Comm local) {
  int lr = 0, ls = 1;
  MPI_Comm_rank(local, &lr);
  MPI_Comm_size(local, &ls);
  MPI_Win win;
  void* base = nullptr;
  MPI_Win_allocate_shared(lr == 0 ? 256 : 0, 1, MPI_INFO_NULL, local, &base, &win);
  MPI_Aint size = 0;
  int unit = 0;
  MPI_Win_shared_query(win, 0, &size, &unit, &base);
  auto* line = new (base) std::atomic<uint64_t>(0);
  MPI_Barrier(local);
  double result = 0;
  if (ls >= 2 && lr < 2) {
    constexpr int kBatches = 15, kTrips = 2000;
    std::vector<double> per_hop;
    uint64_t v = 0;
    for (int b = 0; b < kBatches; ++b) {
      const auto t0 = Clock::now();
      for (int i = 0; i < kTrips; ++i) {
        if (lr == 0) {
          line->store(++v, std::memory_order_release);
          await(*line, v + 1);
          ++v;
        } else {
          await(*line, v + 1);
          ++v;
          line->store(++v, std::memory_order_release);
        }
      }
      per_hop.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / (2.0 * kTrips));
    }
    std::sort(per_hop.begin(), per_hop.end());
    result = per_hop[per_hop.size() / 2];
  }
  MPI_Barrier(local);
  MPI_Win_free(&win);
  return result;
}

}  // namespace

Floor measure_floor() {
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  Floor f;
  f.one_way_us = ping_pong_us(local);
  MPI_Comm_free(&local);
  MPI_Bcast(&f.one_way_us, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return f;
}

double copy_us(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::memcpy(b.data(), a.data(), bytes);  // warm: pages touched, caches filled where they can
  // Enough repetitions for ~2 ms of copying (at least 3), timed one by one; the best.
  const int reps = static_cast<int>(std::clamp<size_t>((size_t{2} << 30) / 1000 / bytes, 3, 2000));
  double best = 1e30;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best, std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    a[static_cast<size_t>(i) % bytes] = b[bytes - 1 - static_cast<size_t>(i) % bytes];  // keeps copies observable
  }
  MPI_Bcast(&best, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return best;
}

}  // namespace kolo::bench

// kolo-bench-process-sets — allreduce on a process set beside MPI_Allreduce on an MPI
// communicator of the same ranks, in the same run; and two disjoint sets at once beside one.
//
// The job's ranks are split in two halves, A (the lower) and B. Bodies, per size (float32
// sum, in place; sizes are per-rank bytes; --tensors tensors of that size per step, all
// submitted before any is waited for, so that kolo fuses small ones):
//   kolo A      the ranks of A allreduce on set A; B idles
//   mpi A       the ranks of A call MPI_Allreduce on a communicator of A (one per tensor)
//   kolo A+B    A on set A and B on set B, at the same time
//   kolo all    every rank on the global set (for reference)
// Times are medians over --iters interleaved runs, each the slowest rank's (bench_util.h).
// kolo/mpi compares "kolo A" with "mpi A"; (A+B)/A shows what the second set costs the first
// (on a machine with fewer cores than ranks the two sets also share the cores).
//   mpirun -np 4 build/bench/kolo-bench-process-sets --max-bytes 16M
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "kolo/kolo.h"

namespace {

struct Options {
  size_t min_bytes = 4096, max_bytes = 16u << 20;
  int factor = 16, tensors = 1, warmup = 3, iters = 20;
};

// One size: `tensors` buffers of `count` floats, refilled before every run.
class Case {
 public:
  Case(size_t count, int tensors) : bufs_(static_cast<size_t>(tensors), std::vector<float>(count)) {}
  void refill() {
    for (auto& b : bufs_)
      for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((kolo::rank() + i) % 7);
  }
  void kolo_on(const kolo::ProcessSet& set, const std::string& tag) {
    std::vector<kolo::Handle> hs;
    for (size_t t = 0; t < bufs_.size(); ++t)
      hs.push_back(kolo::allreduce_async(kolo::TensorView::of(bufs_[t]), "bench.ps." + tag + std::to_string(t),
                                         {kolo::ReduceOp::kSum, 1.0, 1.0, set}));
    for (auto& h : hs) kolo::synchronize(h);
  }
  // Elements that differ from the exact sum over `members` (after a run on their set).
  size_t wrong(const std::vector<int>& members) const {
    size_t bad = 0;
    for (const auto& b : bufs_)
      for (size_t i = 0; i < b.size(); ++i) {
        float want = 0;
        for (int r : members) want += static_cast<float>((r + i) % 7);
        bad += b[i] != want;
      }
    return bad;
  }
  void mpi_on(MPI_Comm comm) {
    for (auto& b : bufs_) MPI_Allreduce(MPI_IN_PLACE, b.data(), static_cast<int>(b.size()), MPI_FLOAT, MPI_SUM, comm);
  }

 private:
  std::vector<std::vector<float>> bufs_;
};

std::string human(size_t bytes) {
  if (bytes >= (1u << 20)) return std::to_string(bytes >> 20) + "M";
  if (bytes >= 1024) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kolo allreduce on a process set beside MPI on a communicator of its ranks"};
  Options o;
  app.add_option("--min-bytes", o.min_bytes, "smallest per-rank size");
  app.add_option("--max-bytes", o.max_bytes, "largest per-rank size");
  app.add_option("--factor", o.factor, "size step");
  app.add_option("--tensors", o.tensors, "tensors of that size per step");
  app.add_option("--warmup", o.warmup);
  app.add_option("--iters", o.iters);
  CLI11_PARSE(app, argc, argv);

  kolo::init(&argc, &argv);
  const int n = kolo::size(), me = kolo::rank();
  if (n < 2) {
    std::fprintf(stderr, "kolo-bench-process-sets needs at least 2 ranks\n");
    kolo::shutdown();
    return 1;
  }
  std::vector<int> a, b;
  for (int r = 0; r < n; ++r) (r < n / 2 ? a : b).push_back(r);
  const kolo::ProcessSet set_a = kolo::add_process_set(a), set_b = kolo::add_process_set(b);
  const bool in_a = set_a.included();
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, in_a ? 0 : 1, me, &half);

  if (me == 0)
    std::printf(
        "# np=%d  A=%zu ranks  B=%zu ranks  tensors/step=%d  medians of %d (ms)\n%10s %10s %10s %10s %10s %8s %8s "
        "%7s\n",
        n, a.size(), b.size(), o.tensors, o.iters, "bytes", "kolo A", "mpi A", "kolo A+B", "kolo all", "kolo/mpi",
        "(A+B)/A", "#wrong");
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= static_cast<size_t>(o.factor)) {
    Case c(bytes / sizeof(float), o.tensors);
    const std::vector<std::function<void()>> bodies = {
        [&] {
          if (in_a) c.kolo_on(set_a, "a");
        },
        [&] {
          if (in_a) c.mpi_on(half);
        },
        [&] { c.kolo_on(in_a ? set_a : set_b, in_a ? "a" : "b"); },
        [&] { c.kolo_on(kolo::ProcessSet{}, "all"); },
    };
    // One checked run of both sets first: every rank's result against the exact sum.
    c.refill();
    bodies[2]();
    unsigned long long bad = c.wrong(in_a ? a : b), any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    const auto s = kolo::bench::measure(o.warmup, o.iters, bodies, [&](size_t) { c.refill(); });
    if (me == 0)
      std::printf("%10s %10.3f %10.3f %10.3f %10.3f %8.2f %8.2f %7llu\n", human(bytes).c_str(), s[0].median_ms,
                  s[1].median_ms, s[2].median_ms, s[3].median_ms, s[0].median_ms / s[1].median_ms,
                  s[2].median_ms / s[0].median_ms, any_bad);
  }
  MPI_Comm_free(&half);
  kolo::barrier("bench.ps.done");
  kolo::remove_process_set(set_a);
  kolo::remove_process_set(set_b);
  kolo::shutdown();
  return 0;
}

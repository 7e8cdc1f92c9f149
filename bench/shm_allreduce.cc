// kolo-bench-shm-allreduce: the shared-memory engine beside MPI_Allreduce, in the same run.
//
//   mpirun -np 2 build/bench/kolo-bench-shm-allreduce [--iters N] [--out DIR]
//          [--segment-bytes B] [--small-bytes B] [--arena-chunk-bytes B] [--no-sweep]
//          [--case 4KB|64MB|tiny|resnet50|sweep] [--batch N] [--factor F] [--max-bytes B] [--fill]
//
// Cases: a 4 KB buffer (latency), one 64 MB tensor, a ResNet-50 gradient step (161 separate
// fp32 tensors, 102 MB: one MPI_Allreduce per tensor, one MPI_Allreduce over one contiguous
// copy, and the engine over the 161 tensors in one call, per tensor, and over the copy),
// and an nccl-tests style size sweep. Every figure is the time of the slowest rank per
// iteration; min and median over the iterations are printed (the machine is shared and
// noisy: the min is the best estimate of what the code can do). With --out DIR the rows are
// also written to DIR/shm_allreduce.csv.
//
// --fill: the buffer is rewritten before every call, MPI's and the engine's alike (outside
// the timing, one call per sample), as kolo-bench-allreduce does and as a training step's
// backward pass does to its gradients. Without it every call reduces the buffer the last
// one left in the caches. The --fill ratio is the one that compares with kolo-bench-allreduce
// and with training; MPI_Allreduce is slower on a rewritten buffer at some sizes and faster
// at others, so the two ratios differ (docs/benchmarks.md). Applies to 4KB, 64MB, tiny and
// the sweep; the resnet50 case ignores it.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/shm_resnet50.h"
#include "ops/shm/shm_arena.h"
#include "ops/shm/shm_hierarchical.h"
#include "ops/shm/shm_kernels.h"

namespace kolo::bench {
namespace {

struct Args {
  int iters = 30;
  std::string out_dir;
  size_t segment_bytes = shm::ShmGroup::Options{}.segment_bytes;
  size_t small_bytes = shm::ShmGroup::Options{}.small_bytes;
  size_t arena_chunk_bytes = shm::ShmGroup::Options{}.arena_chunk_bytes;
  bool sweep = true;
  int batch = 0;      // --batch: calls per timed sample in the sweep (0: 100 up to 256 KB, else 1)
  size_t factor = 4;  // --factor: the sweep's step between sizes
  size_t max_bytes = 128u << 20;  // --max-bytes: the sweep's largest size
  std::string only;  // --case: run just this case (4KB, 64MB, tiny, resnet50, sweep)
  bool fill = false;  // --fill: rewrite the buffer before every call (one call per sample)
  bool runs(const char* kase) const { return only.empty() || only == kase; }
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const bool has_value = i + 1 < argc;
    if (k == "--iters" && has_value) a.iters = std::max(3, std::atoi(argv[++i]));
    else if (k == "--out" && has_value) a.out_dir = argv[++i];
    else if (k == "--segment-bytes" && has_value) a.segment_bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (k == "--small-bytes" && has_value) a.small_bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (k == "--arena-chunk-bytes" && has_value) a.arena_chunk_bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (k == "--batch" && has_value) a.batch = std::max(0, std::atoi(argv[++i]));
    else if (k == "--factor" && has_value) a.factor = std::max<size_t>(2, std::strtoull(argv[++i], nullptr, 10));
    else if (k == "--max-bytes" && has_value) a.max_bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (k == "--no-sweep") a.sweep = false;
    else if (k == "--fill") a.fill = true;
    else if (k == "--case" && has_value) a.only = argv[++i];
    else {
      std::fprintf(stderr, "unknown or incomplete argument \"%s\"\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

struct Timing {
  double min_ms = 0, median_ms = 0;
};

// Times `fn` (`batch` calls back to back, divided by batch) `iters` times after a barrier;
// each sample is the slowest rank's. `before` (may be empty) runs before each sample's
// barrier, untimed.
Timing time_it(const std::function<void()>& fn, int iters, int batch,
               const std::function<void()>& before = nullptr) {
  for (int w = 0; w < std::max(1, 3 / batch); ++w) fn();  // warm-up: page faults, caches
  std::vector<double> samples;
  for (int i = 0; i < iters; ++i) {
    if (before) before();
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    for (int b = 0; b < batch; ++b) fn();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / batch;
    double slowest = 0;
    MPI_Allreduce(&ms, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    samples.push_back(slowest);
  }
  std::sort(samples.begin(), samples.end());
  return {samples.front(), samples[samples.size() / 2]};
}

void check(const Status& s, const char* what) {
  if (s.is_ok()) return;
  std::fprintf(stderr, "%s: %s\n", what, s.to_string().c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

struct Bench {
  Args args;
  int rank = 0, size = 1;
  shm::ShmGroup* group = nullptr;
  MPI_Comm local = MPI_COMM_NULL;
  std::string name;  // segment name prefix of this run
  FILE* csv = nullptr;

  void row(const std::string& kase, const std::string& impl, size_t bytes, const Timing& t,
           const Timing* baseline) {
    const double algbw = bytes / (t.min_ms * 1e6);
    const double busbw = algbw * 2.0 * (size - 1) / size;
    if (rank == 0) {
      std::printf("%-14s %-26s %12zu %10.4f %10.4f %8.2f %8.2f", kase.c_str(), impl.c_str(), bytes,
                  t.min_ms, t.median_ms, algbw, busbw);
      if (baseline != nullptr) std::printf("   x%.2f", baseline->min_ms / t.min_ms);
      std::printf("\n");
      if (csv != nullptr) {
        std::fprintf(csv, "%s,%s,%d,%zu,%.6f,%.6f,%.3f,%.3f\n", kase.c_str(), impl.c_str(), size,
                     bytes, t.min_ms, t.median_ms, algbw, busbw);
      }
    }
  }

  // With --fill: what runs before each sample (rewrites buf; `batch` must then be 1).
  std::function<void()> refill(float* buf, size_t count) const {
    if (!args.fill) return nullptr;
    const float mine = static_cast<float>(rank + 1);
    return [=] { std::fill(buf, buf + count, mine); };
  }
  // One call per sample with --fill (the rewrite must come before each call), else `batch`.
  int per_sample(int batch) const { return args.fill ? 1 : batch; }
  Timing mpi(float* buf, size_t count, int batch) {
    return time_it([&] { MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
                   args.iters, per_sample(batch), refill(buf, count));
  }
  Timing kolo(float* buf, size_t count, int batch) {
    return time_it([&] { check(group->allreduce(buf, count, DType::kFloat32, ReduceOp::kSum), "shm allreduce"); },
                   args.iters, per_sample(batch), refill(buf, count));
  }

  // Sanity: a sum over ranks of (rank + 1) must come out as n(n+1)/2 everywhere.
  void verify(float* buf, size_t count) {
    std::fill(buf, buf + count, static_cast<float>(rank + 1));
    check(group->allreduce(buf, count, DType::kFloat32, ReduceOp::kSum), "shm allreduce");
    const float want = size * (size + 1) / 2.0f;
    for (size_t i = 0; i < count; i += 997) {
      if (buf[i] != want) {
        std::fprintf(stderr, "rank %d: wrong result %g at %zu (want %g)\n", rank, buf[i], i, want);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    }
    std::fill(buf, buf + count, 0.0f);  // zeros stay zeros: no overflow over many iterations
  }
  // With --fill: the last timed call reduced a fresh rank + 1 everywhere; `want` (the sum or
  // the average over ranks) must be in every checked element. Aborts the job if not.
  void check_filled(const float* buf, size_t count, float want) {
    if (!args.fill) return;
    for (size_t i = 0; i < count; i += 997) {
      if (buf[i] != want) {
        std::fprintf(stderr, "rank %d: --fill: wrong result %g at %zu (want %g)\n", rank, buf[i], i, want);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    }
  }

  void single(const std::string& kase, size_t bytes, int batch) {
    std::vector<float> buf(bytes / sizeof(float));
    verify(buf.data(), buf.size());
    const Timing m = mpi(buf.data(), buf.size(), batch);
    const Timing k = kolo(buf.data(), buf.size(), batch);
    check_filled(buf.data(), buf.size(), size * (size + 1) / 2.0f);
    row(kase, "MPI_Allreduce", bytes, m, nullptr);
    row(kase, "kolo-shm", bytes, k, &m);
  }

  void resnet50();
  void tiny();
  void resnet50_zero_copy(const std::vector<ParamShape>& params, const Timing& baseline);
  void calibrate();
};

// The machine's speed at the time of the run: one core copying and summing 102 MB (the issue
// measured 4.6 ms and 3.6 ms on an idle machine of this kind; its targets assume that).
void Bench::calibrate() {
  const size_t n = 102228128 / sizeof(float);
  std::vector<float> a(n, 1.0f), b(n, 2.0f);
  Timing copy{}, sum{};
  if (rank == 0) {
    std::vector<double> c, s;
    for (int i = 0; i < 10; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      std::memcpy(b.data(), a.data(), n * sizeof(float));
      auto t1 = std::chrono::steady_clock::now();
      const void* srcs[2] = {a.data(), b.data()};
      shm::reduce_sources(b.data(), srcs, 2, n, DType::kFloat32, ReduceOp::kSum);
      auto t2 = std::chrono::steady_clock::now();
      c.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      s.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
    std::sort(c.begin(), c.end());
    std::sort(s.begin(), s.end());
    copy = {c.front(), c[c.size() / 2]};
    sum = {s.front(), s[s.size() / 2]};
    std::printf("# calibration, one core, 102 MB: memcpy %.2f ms (median %.2f), sum of two arrays "
                "%.2f ms (median %.2f); the issue's idle machine: 4.6 and 3.6 ms -> speed factor %.2f\n",
                copy.min_ms, copy.median_ms, sum.min_ms, sum.median_ms, copy.min_ms / 4.6);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

void Bench::resnet50() {
  const auto params = resnet50_parameters();
  std::vector<std::vector<float>> grads;
  std::vector<shm::Piece> pieces;
  size_t total = 0;
  for (const ParamShape& p : params) {
    grads.emplace_back(static_cast<size_t>(p.numel()), 0.0f);
    total += grads.back().size();
  }
  for (auto& g : grads) pieces.push_back({g.data(), g.size()});
  std::vector<float> fused(total, 0.0f);
  verify(fused.data(), fused.size());
  const size_t bytes = total * sizeof(float);
  const int it = args.iters;
  const Timing per_tensor = time_it([&] {
    for (auto& g : grads) MPI_Allreduce(MPI_IN_PLACE, g.data(), static_cast<int>(g.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }, it, 1);
  const Timing one_buffer = mpi(fused.data(), fused.size(), 1);
  const Timing shm_pieces = time_it([&] {
    check(group->allreduce(pieces, DType::kFloat32, ReduceOp::kSum), "shm allreduce");
  }, it, 1);
  // As kolo's runtime would run it: tensors fused greedily into responses of at most the
  // fusion threshold (4 MiB), each reduced in place as one list of pieces.
  std::vector<std::vector<shm::Piece>> buckets(1);
  size_t in_bucket = 0;
  for (const shm::Piece& p : pieces) {
    const size_t b = p.count * sizeof(float);
    if (in_bucket > 0 && in_bucket + b > (4u << 20)) {
      buckets.emplace_back();
      in_bucket = 0;
    }
    buckets.back().push_back(p);
    in_bucket += b;
  }
  const Timing shm_buckets = time_it([&] {
    for (const auto& bucket : buckets) check(group->allreduce(bucket, DType::kFloat32, ReduceOp::kSum), "shm allreduce");
  }, it, 1);
  const Timing shm_loop = time_it([&] {
    for (auto& g : grads) check(group->allreduce(g.data(), g.size(), DType::kFloat32, ReduceOp::kSum), "shm allreduce");
  }, it, 1);
  const Timing shm_fused = kolo(fused.data(), fused.size(), 1);
  const Timing shm_fused_avg = time_it([&] {
    check(group->allreduce(fused.data(), fused.size(), DType::kFloat32, ReduceOp::kAverage), "shm allreduce");
  }, it, 1);
  row("resnet50", "MPI per tensor (161)", bytes, per_tensor, nullptr);
  row("resnet50", "MPI one 102MB buffer", bytes, one_buffer, nullptr);
  row("resnet50", "kolo-shm 161 pieces", bytes, shm_pieces, &per_tensor);
  row("resnet50", "kolo-shm " + std::to_string(buckets.size()) + " fused <=4MB", bytes, shm_buckets, &per_tensor);
  row("resnet50", "kolo-shm per tensor", bytes, shm_loop, &per_tensor);
  row("resnet50", "kolo-shm one buffer", bytes, shm_fused, &one_buffer);
  row("resnet50", "kolo-shm one buffer, average", bytes, shm_fused_avg, &one_buffer);
  resnet50_zero_copy(params, per_tensor);
}

// Issue 5's many-tiny-tensors step: 1,000 tensors of 4 KB, adjacent in one buffer as a
// trainer keeps them, reduced as one list of pieces (what one fused response does) beside
// one MPI_Allreduce of the 4 MB.
void Bench::tiny() {
  const size_t n = 1000, each = 1024;
  std::vector<float> flat(n * each, 0.0f);
  verify(flat.data(), flat.size());
  std::vector<shm::Piece> pieces;
  for (size_t i = 0; i < n; ++i) pieces.push_back({flat.data() + i * each, each});
  const Timing one = mpi(flat.data(), flat.size(), 1);
  const auto before = refill(flat.data(), flat.size());
  const Timing k1 = time_it([&] {
    check(group->allreduce(flat.data(), flat.size(), DType::kFloat32, ReduceOp::kAverage), "shm allreduce");
  }, args.iters, 1, before);
  const Timing k = time_it([&] {
    check(group->allreduce(pieces, DType::kFloat32, ReduceOp::kAverage), "shm allreduce");
  }, args.iters, 1, before);
  check_filled(flat.data(), flat.size(), (size + 1) / 2.0f);
  row("tiny", "MPI one 4MB buffer", flat.size() * 4, one, nullptr);
  row("tiny", "kolo-shm 1000 pieces, avg", flat.size() * 4, k, &one);
  row("tiny", "kolo-shm one buffer, avg", flat.size() * 4, k1, &one);
}

// The gradients allocated in a ShmArena, as a trainer using kolo's allocator would.
void Bench::resnet50_zero_copy(const std::vector<ParamShape>& params, const Timing& baseline) {
  size_t total = 0;
  for (const ParamShape& p : params) total += static_cast<size_t>(p.numel());
  std::unique_ptr<shm::ShmArena> arena;
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  const size_t bytes = total * sizeof(float);
  check(shm::ShmArena::create({name + "-arena", local_rank, local_size, bytes + params.size() * 64},
                              shm::mpi_agree(local), &arena),
        "shm arena");
  std::vector<shm::Piece> pieces;
  for (const ParamShape& p : params) {
    auto* g = static_cast<float*>(arena->allocate(static_cast<size_t>(p.numel()) * sizeof(float)));
    std::fill(g, g + p.numel(), 0.0f);
    pieces.push_back({g, static_cast<size_t>(p.numel())});
  }
  const Timing t = time_it([&] {
    check(group->allreduce_in_arena(*arena, pieces, DType::kFloat32, ReduceOp::kSum), "shm zero-copy allreduce");
  }, args.iters, 1);
  // Average: the 1/n is folded into the reduction, so it should cost nothing extra.
  const Timing avg = time_it([&] {
    check(group->allreduce_in_arena(*arena, pieces, DType::kFloat32, ReduceOp::kAverage), "shm zero-copy allreduce");
  }, args.iters, 1);
  row("resnet50", "kolo-shm zero-copy arena", bytes, t, &baseline);
  row("resnet50", "kolo-shm zero-copy, average", bytes, avg, &baseline);
}

int run(int argc, char** argv) {
  Bench b;
  b.args = parse(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &b.size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int local_rank = 0, local_size = 0;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  if (local_size != b.size) {
    if (b.rank == 0) std::fprintf(stderr, "run all ranks on one host: this compares one host's engines\n");
    return 2;
  }
  int pid = static_cast<int>(getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  shm::ShmGroup::Options o;
  o.name = "/kolo-bench-" + std::to_string(pid);
  b.name = o.name;
  b.local = local;
  o.local_rank = local_rank;
  o.local_size = local_size;
  o.segment_bytes = b.args.segment_bytes;
  o.small_bytes = b.args.small_bytes;
  o.arena_chunk_bytes = b.args.arena_chunk_bytes;
  std::unique_ptr<shm::ShmGroup> group;
  check(shm::ShmGroup::create(o, shm::mpi_agree(local), &group), "shm create");
  b.group = group.get();
  if (!b.args.out_dir.empty() && b.rank == 0) {
    b.csv = std::fopen((b.args.out_dir + "/shm_allreduce.csv").c_str(), "w");
    if (b.csv != nullptr) std::fprintf(b.csv, "case,impl,np,bytes,min_ms,median_ms,algbw_GBps,busbw_GBps\n");
  }
  if (b.rank == 0) {
    std::printf("# np=%d  slot %zu bytes  small path <= %zu bytes  zero-copy chunk %zu bytes  AVX2 reduce: %s  iters %d  "
                "%s\n",
                b.size, group->slot_bytes(), o.small_bytes, o.arena_chunk_bytes, shm::reduce_uses_avx2() ? "yes" : "no",
                b.args.iters,
                b.args.fill ? "--fill: buffer rewritten before every call, one call per sample"
                            : "buffer not rewritten between calls");
    std::printf("%-14s %-26s %12s %10s %10s %8s %8s   %s\n", "case", "impl", "bytes", "min ms",
                "median ms", "algbw", "busbw", "speed-up (min)");
  }
  if (b.args.only.empty()) b.calibrate();
  if (b.args.runs("4KB")) b.single("4KB", 4096, 1000);
  if (b.args.runs("64MB")) b.single("64MB", 64u << 20, 1);
  if (b.args.runs("tiny")) b.tiny();
  if (b.args.runs("resnet50")) b.resnet50();
  if (b.args.sweep && b.args.runs("sweep")) {
    for (size_t bytes = 4096; bytes <= b.args.max_bytes; bytes *= b.args.factor) {
      b.single("sweep", bytes, b.args.batch > 0 ? b.args.batch : bytes <= (256u << 10) ? 100 : 1);
    }
  }
  if (b.csv != nullptr) std::fclose(b.csv);
  group.reset();
  MPI_Comm_free(&local);
  return 0;
}

}  // namespace
}  // namespace kolo::bench

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rc = kolo::bench::run(argc, argv);
  MPI_Finalize();
  return rc;
}

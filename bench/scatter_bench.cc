// kolo-bench-scatter — alltoall and reducescatter through kolo beside MPI_Alltoallv and
// MPI_Reduce_scatter on the same buffers, in the same run; and a grouped allreduce of a
// model's gradient set beside the same tensors submitted one by one.
//
// Sweep (--op alltoall|reducescatter): sizes are per-rank input bytes, float32; alltoall
// sends an even share to every rank, reducescatter sums and leaves each rank its rows
// (Horovod's split). Columns as nccl-tests prints them: algbw = size / time, busbw = algbw x
// (n-1)/n (both collectives' factor); #wrong counts elements that differ from the exact
// answer; kolo/mpi is the ratio of median times.
// --into private|shared (alltoall): kolo writes into an output the caller keeps across calls
// (kolo::alltoall's output form), a private buffer like MPI's, or allocate_shared memory.
// --read: after every call (kolo's and MPI's alike, inside the timed call) the rank reads all
// the rows it received, as a training step would; the checksums are checked and printed.
// Grouped (--op grouped --workload resnet50): per step, every gradient submitted with
// allreduce_async (fused by the coordinator as usual) beside one grouped_allreduce_async.
//   mpirun -np 4 build/bench/kolo-bench-scatter --op alltoall --max-bytes 64M
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "floor.h"
#include "kolo/kolo.h"
#include "workloads.h"

namespace {

struct Options {
  std::string op = "alltoall", workload = "resnet50";
  size_t min_bytes = 4, max_bytes = 64u << 20;
  int factor = 4, warmup = 3, iters = 20;
  bool drop_result = false;  // free kolo's previous result before each call
  bool read = false;         // read every received row after each call (both sides, timed)
  std::string into;          // alltoall into a kept output: "private" or "shared"; empty: none
};

// Sum of the bit patterns of n floats: reads every byte, and the compiler cannot drop it
// because the sum is checked and printed.
uint64_t checksum(const float* p, size_t n) {
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + i, sizeof bits);
    sum += bits;
  }
  return sum;
}

// One size: the input, kolo's output and MPI's output, and the MPI counts.
class Case {
 public:
  Case(const std::string& op, size_t bytes, bool drop_result, const std::string& into, bool read)
      : op_(op), drop_result_(drop_result), read_(read), n_(kolo::size()), r_(kolo::rank()) {
    const size_t per = std::max<size_t>(1, bytes / sizeof(float) / static_cast<size_t>(n_));
    count_ = per * static_cast<size_t>(n_);  // a multiple of the ranks: even alltoall
    in_.resize(count_);
    counts_.assign(static_cast<size_t>(n_), static_cast<int>(per));
    displs_.resize(static_cast<size_t>(n_));
    for (int j = 0; j < n_; ++j) displs_[j] = j * static_cast<int>(per);
    if (op == "reducescatter") {
      for (int j = 0; j < n_; ++j) counts_[j] = static_cast<int>(kolo::reducescatter_rows(static_cast<int64_t>(count_), n_, j));
      out_mpi_.resize(static_cast<size_t>(counts_[r_]));
      int64_t first = 0;
      kolo::reducescatter_rows(static_cast<int64_t>(count_), n_, r_, &first);
      first_ = static_cast<size_t>(first);
    } else {
      out_mpi_.resize(count_);
    }
    for (size_t i = 0; i < count_; ++i) in_[i] = value(r_, i);
    if (op == "alltoall" && into == "private") {
      out_private_.resize(count_);
      into_ = out_private_.data();
    } else if (op == "alltoall" && into == "shared") {
      into_ = static_cast<float*>(kolo::allocate_shared(count_ * sizeof(float)));  // every rank alike
      shared_ = true;
    }
    if (read_) {  // what every correct call's rows sum to
      std::vector<float> want(out_mpi_.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = expected(i);
      want_sum_ = checksum(want.data(), want.size());
    }
  }
  ~Case() {
    if (shared_) kolo::release_shared(into_);  // the latest allocation: cases come one at a time
  }
  Case(const Case&) = delete;
  Case& operator=(const Case&) = delete;
  size_t bytes() const { return count_ * sizeof(float); }

  void run_kolo() {
    kolo::TensorView v = kolo::TensorView::of(in_.data(), {static_cast<int64_t>(count_)});
    if (into_ != nullptr) {
      kolo::alltoall(v, kolo::TensorView::of(into_, {static_cast<int64_t>(count_)}), "bench.a2a.into");
    } else {
      if (drop_result_) out_kolo_ = kolo::Tensor();  // the new result may then reuse its memory
      out_kolo_ = op_ == "alltoall" ? kolo::alltoall(v, "bench.a2a")
                                    : kolo::reducescatter(v, "bench.rs", {kolo::ReduceOp::kSum});
    }
    if (read_) {
      const float* out = into_ != nullptr ? into_ : out_kolo_.data<float>();
      const size_t n = into_ != nullptr ? count_ : static_cast<size_t>(out_kolo_.num_elements());
      kolo_sum_ += checksum(out, n);
      ++kolo_calls_;
    }
  }
  void run_mpi() {
    if (op_ == "alltoall")
      MPI_Alltoallv(in_.data(), counts_.data(), displs_.data(), MPI_FLOAT, out_mpi_.data(), counts_.data(),
                    displs_.data(), MPI_FLOAT, MPI_COMM_WORLD);
    else
      MPI_Reduce_scatter(in_.data(), out_mpi_.data(), counts_.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (read_) {
      mpi_sum_ += checksum(out_mpi_.data(), out_mpi_.size());
      ++mpi_calls_;
    }
  }
  // --read: the summed checksums, and calls whose rows did not sum as the exact answer's do
  // (0 or 1 per side: only the total is kept).
  uint64_t kolo_sum() const { return kolo_sum_; }
  uint64_t mpi_sum() const { return mpi_sum_; }
  bool kolo_read_wrong() const { return kolo_sum_ != want_sum_ * kolo_calls_; }
  bool mpi_read_wrong() const { return mpi_sum_ != want_sum_ * mpi_calls_; }
  // Element i of this rank's exact output.
  float expected(size_t i) const {
    if (op_ == "alltoall") {
      const size_t per = count_ / static_cast<size_t>(n_);
      return value(static_cast<int>(i / per), static_cast<size_t>(r_) * per + i % per);
    }
    float want = 0;
    for (int r = 0; r < n_; ++r) want += value(r, first_ + i);
    return want;
  }
  size_t wrong(const float* out, size_t n) const {
    if (n != out_mpi_.size()) return out_mpi_.size();  // MPI's output has the exact length
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += out[i] != expected(i);
    return bad;
  }
  size_t kolo_wrong() const {
    if (into_ != nullptr) return wrong(into_, count_);
    return wrong(out_kolo_.data<float>(), static_cast<size_t>(out_kolo_.num_elements()));
  }
  size_t mpi_wrong() const { return wrong(out_mpi_.data(), out_mpi_.size()); }

 private:
  static float value(int rank, size_t i) { return static_cast<float>((static_cast<size_t>(rank) * 13 + i) % 251); }
  std::string op_;
  bool drop_result_, read_;
  int n_, r_;
  uint64_t want_sum_ = 0, kolo_sum_ = 0, mpi_sum_ = 0, kolo_calls_ = 0, mpi_calls_ = 0;
  size_t count_ = 0, first_ = 0;  // first_: reducescatter, this rank's first row
  std::vector<float> in_, out_mpi_, out_private_;
  float* into_ = nullptr;  // --into: kolo's output, kept across calls
  bool shared_ = false;    // into_ is from allocate_shared
  std::vector<int> counts_, displs_;
  kolo::Tensor out_kolo_;
};

int sweep(const Options& o) {
  const int n = kolo::size();
  const double factor = static_cast<double>(n - 1) / n;
  if (kolo::rank() == 0) {
    std::printf("# kolo-bench-scatter: %s, float32%s, %d ranks (times are medians)%s%s\n", o.op.c_str(),
                o.op == "reducescatter" ? " sum" : ", even split", n, o.into.empty() ? "" : ", kolo into a kept output: ",
                o.into.c_str());
    if (o.read)
      std::printf("# --read: after every call each rank reads all its received rows (a checksum), kolo and MPI "
                  "alike, inside the timed call\n");
  }
  uint64_t kolo_sum = 0, mpi_sum = 0;
  int read_wrong = 0;  // sizes where this rank's checksums missed
  // What no implementation can beat: a cache line from one core to another, or every rank at
  // once copying the (n-1)/n of its buffer that goes to or comes from its peers.
  const kolo::bench::Floor fl = kolo::bench::measure_floor();
  if (kolo::rank() == 0) {
    std::printf("# floor(us) = max(a cache line one way between two cores: %.3f us, every rank copying (n-1)/n "
                "of the size at once)\n", fl.one_way_us);
    std::printf("#%12s | %11s %8s %8s %7s | %11s %8s %8s %7s | %9s | %9s\n", "size(B)", "kolo(us)", "algbw", "busbw",
                "#wrong", "mpi(us)", "algbw", "busbw", "#wrong", "kolo/mpi", "floor(us)");
  }
  int rc = 0;
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= static_cast<size_t>(o.factor)) {
    Case c(o.op, bytes, o.drop_result, o.into, o.read);
    const int iters = std::max(3, static_cast<int>(o.iters * std::min<size_t>(64, (64u << 20) / c.bytes() + 1) / 8));
    auto st = kolo::bench::measure(o.warmup, iters, {[&] { c.run_kolo(); }, [&] { c.run_mpi(); }});
    const size_t kw = c.kolo_wrong(), mw = c.mpi_wrong();
    const double floor_us = std::max(fl.one_way_us, kolo::bench::copy_us(static_cast<size_t>(c.bytes() * factor)));
    rc |= (kw || mw) ? 2 : 0;
    kolo_sum += c.kolo_sum();
    mpi_sum += c.mpi_sum();
    read_wrong += c.kolo_read_wrong() || c.mpi_read_wrong();
    if (kolo::rank() == 0) {
      auto bw = [&](double ms) { return c.bytes() / (ms * 1e-3) / 1e9; };
      std::printf(" %12zu | %11.1f %8.3f %8.3f %7zu | %11.1f %8.3f %8.3f %7zu | %9.2f | %9.2f\n", c.bytes(),
                  st[0].median_ms * 1e3, bw(st[0].median_ms), bw(st[0].median_ms) * factor, kw,
                  st[1].median_ms * 1e3, bw(st[1].median_ms), bw(st[1].median_ms) * factor, mw,
                  st[0].median_ms / st[1].median_ms, floor_us);
    }
  }
  if (o.read) {
    if (read_wrong)
      std::printf("# rank %d: --read checksums differ from the exact answer's at %d sizes\n", kolo::rank(), read_wrong);
    rc |= read_wrong ? 2 : 0;
    if (kolo::rank() == 0)
      std::printf("# --read checksums on rank 0 (all calls, all sizes): kolo %llu, mpi %llu\n",
                  static_cast<unsigned long long>(kolo_sum), static_cast<unsigned long long>(mpi_sum));
  }
  return rc;
}

int grouped(const Options& o) {
  const auto set = kolo::bench::workload_by_name(o.workload);
  std::vector<std::vector<float>> grads;
  std::vector<kolo::TensorView> views;
  for (const auto& g : set) {
    int64_t n = 1;
    for (int64_t d : g.shape) n *= d;
    grads.emplace_back(static_cast<size_t>(n), 1.0f);
  }
  for (size_t i = 0; i < set.size(); ++i) views.push_back(kolo::TensorView::of(grads[i].data(), set[i].shape));
  std::vector<kolo::Handle> handles(set.size());
  const auto one_by_one = [&] {
    for (size_t i = 0; i < set.size(); ++i)
      handles[i] = kolo::allreduce_async(views[i], set[i].name, {kolo::ReduceOp::kAverage});
    for (auto& h : handles) kolo::synchronize(h);
  };
  const auto as_group = [&] { kolo::grouped_allreduce(views, "bench.group", {kolo::ReduceOp::kAverage}); };
  // Where each form's time goes on this rank (runtime_stats deltas, summed over all rounds).
  struct Split {
    double exec = 0, rendezvous = 0, coord = 0;
    uint64_t collectives = 0;
  } split[2];
  auto counted = [&](int k, const std::function<void()>& body) {
    return [&, k, body] {
      const kolo::RuntimeStats a = kolo::runtime_stats();
      body();
      const kolo::RuntimeStats b = kolo::runtime_stats();
      split[k].exec += b.execution_seconds - a.execution_seconds;
      split[k].rendezvous += b.rendezvous_seconds - a.rendezvous_seconds;
      split[k].coord += b.coordination_seconds - a.coordination_seconds;
      split[k].collectives += b.collectives - a.collectives;
    };
  };
  auto st = kolo::bench::measure(o.warmup, o.iters, {counted(0, one_by_one), counted(1, as_group)});
  size_t wrong = 0;
  for (const auto& g : grads)
    for (float v : g) wrong += v != 1.0f;  // the average of ones, step after step
  if (kolo::rank() == 0) {
    std::printf("# grouped allreduce, workload %s: %zu tensors, %d ranks, average, #wrong %zu\n", o.workload.c_str(),
                set.size(), kolo::size(), wrong);
    std::printf("  %-34s min %9.3f ms  median %9.3f ms\n", "one by one (allreduce_async each)", st[0].min_ms,
                st[0].median_ms);
    std::printf("  %-34s min %9.3f ms  median %9.3f ms   %.2fx one by one (medians)\n", "grouped_allreduce",
                st[1].min_ms, st[1].median_ms, st[1].median_ms / st[0].median_ms);
  }
  for (int r = 0; r < kolo::size(); ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (r != kolo::rank()) continue;
    for (int k = 0; k < 2; ++k)
      std::printf("  rank %d, %-10s all rounds: execution %.1f ms, rendezvous %.1f ms, coordination %.1f ms, %llu "
                  "responses\n",
                  r, k == 0 ? "one by one" : "grouped", split[k].exec * 1e3, split[k].rendezvous * 1e3,
                  split[k].coord * 1e3, static_cast<unsigned long long>(split[k].collectives));
  }
  return wrong ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"kolo alltoall / reducescatter beside MPI, and grouped allreduce beside one by one"};
  app.add_option("--op", o.op, "alltoall | reducescatter | grouped")
      ->check(CLI::IsMember({"alltoall", "reducescatter", "grouped"}));
  app.add_option("--workload", o.workload, "grouped: lenet | resnet20 | resnet50 | bert-base | tiny");
  app.add_option("--min-bytes", o.min_bytes, "smallest size")->transform(CLI::AsSizeValue(false));
  app.add_option("--max-bytes", o.max_bytes, "largest size")->transform(CLI::AsSizeValue(false));
  app.add_option("--factor", o.factor, "size multiplier per row")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "untimed rounds")->check(CLI::NonNegativeNumber);
  app.add_option("--iters", o.iters, "timed rounds (scaled up for small sizes)")->check(CLI::PositiveNumber);
  app.add_flag("--drop-result", o.drop_result,
               "free kolo's previous result before each call (as a caller that does not keep it; by default "
               "the previous result lives until the new one replaces it, so two results are live at once)");
  app.add_option("--into", o.into, "alltoall into an output kept across calls: private | shared (allocate_shared)")
      ->check(CLI::IsMember({"private", "shared"}));
  app.add_flag("--read", o.read,
               "after every call read all the received rows (a checksum of the output), kolo's and MPI's alike; "
               "the read is timed, inside each call's time, as in a training step that uses what it receives");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  kolo::init(&argc, &argv);
  const int rc = o.op == "grouped" ? grouped(o) : sweep(o);
  kolo::shutdown();
  return rc;
}

// kolo-bench-train — synthetic-data training throughput of the bundled trainer, through the
// real path: kolo-train's loop (examples/kolo_train/trainer.h), DistributedOptimizer with one
// allreduce per gradient submitted from the backward hook, so communication overlaps the
// backward pass exactly as in training.
//
// Each rank times every step (batch, forward, backward, step). The first --warmup steps are
// not counted. Throughput is over the timed window: window = the slowest rank's sum of its
// timed step times; images/s in total = the ranks' timed images / window, per rank = total /
// ranks. Also printed: the median over steps of the slowest rank's step time, and the mean
// time per step spent in DistributedOptimizer::step() waiting for allreduces (communication
// that the backward pass did not hide).
//   mpirun -np 2 build/bench/kolo-bench-train --model resnet20 --steps 20 --csv out.csv
// --device gpu runs the same loop on the GPU trainer (nn/gpu; the batch is built on the host
// and uploaded every step, as in training):
//   build/bench/kolo-bench-train --device gpu --model resnet50 --batch-size 128
// Exit status 2 when the run is not sound (a step missing, a non-finite loss).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "examples/kolo_train/trainer.h"
#include "kolo/kolo.h"

namespace {

struct Options {
  std::string model = "resnet20", csv, json;
  std::string device = "cpu";  // cpu | gpu (kolo-train's --device)
  std::string gradients = "kolo";  // kolo | mpi (the baseline; TrainOptions::gradients)
  int batch_size = 0;  // per rank; 0: the model's default below
  int warmup = 3, steps = 20, threads = 1;
  uint64_t seed = 42;
};

// Per-rank batches that keep one step well above the allreduce latency yet fit a 2-core
// machine's patience: ResNet-50 at 224x224 costs ~100x a ResNet-20 image.
int default_batch(const std::string& model) {
  if (model == "lenet") return 64;
  if (model == "resnet50") return 4;
  return 32;
}

struct Samples {
  std::vector<double> seconds, wait;  // per timed step
  std::vector<double> losses;         // per step, warm-up included
  double images = 0;                  // in the timed steps
};

struct Result {
  int ranks = 0, threads = 0, batch = 0, steps = 0;
  double window_s = 0, per_rank_ips = 0, total_ips = 0, step_ms_median = 0, wait_ms_mean = 0;
  double wait_floor_ms_mean = 0;  // mean over steps of the least wait of any rank
  std::vector<double> rank_wait_ms;  // each rank's mean wait per step
  double compute_ms_p10 = 0, compute_ms_p90 = 0;  // rank 0: step time less its wait
  bool oversubscribed = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Every rank calls this with its own timed samples; every rank gets the same result.
Result reduce_across_ranks(const Options& o, const Samples& s) {
  const auto steps = static_cast<int64_t>(s.seconds.size());
  // Per step, the slowest rank's time (ranks are in lock-step through the allreduces).
  std::vector<double> step_max = s.seconds;
  kolo::allreduce(kolo::TensorView::of(step_max.data(), kolo::Shape{steps}), "bench.step_max",
                  kolo::AllreduceOptions{kolo::ReduceOp::kMax});
  // Per step, the least any rank waited: what even the last rank to finish its backward pass
  // waits (the last gradients' negotiation and reduction); the rest of the mean wait is the
  // ranks waiting for each other.
  std::vector<double> wait_min = s.wait;
  kolo::allreduce(kolo::TensorView::of(wait_min.data(), kolo::Shape{steps}), "bench.wait_min",
                  kolo::AllreduceOptions{kolo::ReduceOp::kMin});
  double window = 0, wait = 0, images = s.images;
  for (int64_t i = 0; i < steps; ++i) {
    window += s.seconds[static_cast<size_t>(i)];
    wait += s.wait[static_cast<size_t>(i)];
  }
  // Each rank's mean wait (a rank that waits far less than the others is the slow one).
  std::vector<double> rank_wait(static_cast<size_t>(kolo::size()), 0.0);
  rank_wait[static_cast<size_t>(kolo::rank())] = steps > 0 ? wait / static_cast<double>(steps) * 1e3 : 0.0;
  kolo::allreduce(kolo::TensorView::of(rank_wait.data(), kolo::Shape{static_cast<int64_t>(rank_wait.size())}),
                  "bench.rank_wait", kolo::AllreduceOptions{kolo::ReduceOp::kSum});
  kolo::allreduce(kolo::TensorView::of(&window, kolo::Shape{1}), "bench.window",
                  kolo::AllreduceOptions{kolo::ReduceOp::kMax});
  kolo::allreduce(kolo::TensorView::of(&wait, kolo::Shape{1}), "bench.wait",
                  kolo::AllreduceOptions{kolo::ReduceOp::kAverage});
  kolo::allreduce(kolo::TensorView::of(&images, kolo::Shape{1}), "bench.images",
                  kolo::AllreduceOptions{kolo::ReduceOp::kSum});
  Result r;
  r.ranks = kolo::size();
  r.threads = o.threads;
  r.batch = o.batch_size;
  r.steps = o.steps;
  r.window_s = window;
  r.total_ips = images / window;
  r.per_rank_ips = r.total_ips / r.ranks;
  r.step_ms_median = median(step_max) * 1e3;
  // Rank 0's own step times without the wait: how much its compute varies from step to step
  // (with several ranks, every rank waits for the slowest one each step, so this variation
  // becomes waiting).
  std::vector<double> own;
  for (int64_t i = 0; i < steps; ++i) own.push_back((s.seconds[static_cast<size_t>(i)] - s.wait[static_cast<size_t>(i)]) * 1e3);
  std::sort(own.begin(), own.end());
  if (!own.empty()) {
    r.compute_ms_p10 = own[own.size() / 10];
    r.compute_ms_p90 = own[own.size() * 9 / 10];
  }
  r.wait_ms_mean = wait / o.steps * 1e3;
  double floor = 0;
  for (double w : wait_min) floor += w;
  r.wait_floor_ms_mean = floor / o.steps * 1e3;
  r.rank_wait_ms = rank_wait;
  const unsigned cores = std::thread::hardware_concurrency();
  r.oversubscribed = cores > 0 && static_cast<unsigned>(r.ranks * r.threads) > cores;
  return r;
}

const char* kCsvHeader =
    "model,ranks,threads_per_rank,batch_per_rank,steps,window_s,images_per_s_per_rank,"
    "images_per_s_total,step_ms_median,allreduce_wait_ms_mean,oversubscribed,device";

std::string csv_row(const Options& o, const Result& r) {
  char line[512];
  const std::string model = o.gradients == "mpi" ? o.model + "/mpi" : o.model;
  std::snprintf(line, sizeof line, "%s,%d,%d,%d,%d,%.4f,%.2f,%.2f,%.3f,%.3f,%d,%s", model.c_str(), r.ranks,
                r.threads, r.batch, r.steps, r.window_s, r.per_rank_ips, r.total_ips, r.step_ms_median,
                r.wait_ms_mean, r.oversubscribed ? 1 : 0, o.device.c_str());
  return line;
}

void print_result(const Options& o, const Result& r) {
  std::printf("# kolo-bench-train: %s on %s, %d rank(s) x batch %d, %d thread(s) per rank, %d warm-up + %d timed "
              "steps, synthetic data, gradients averaged by %s%s\n",
              o.model.c_str(), o.device.c_str(), r.ranks, r.batch, r.threads, o.warmup, r.steps,
              o.gradients == "mpi" ? "one MPI_Allreduce after backward (baseline)" : "kolo", r.oversubscribed ? " (OVERSUBSCRIBED: more ranks x threads than cores)" : "");
  if (kolo::shared_memory_capacity() > 0) {
    std::printf("# kolo shared memory (KOLO_SHM_ARENA_BYTES): %zu of %zu bytes per rank in use (the "
                "DistributedOptimizer's gradients when every rank could allocate them: zero-copy allreduce)\n",
                kolo::shared_memory_capacity() - kolo::shared_memory_available(), kolo::shared_memory_capacity());
  }
  std::printf("# throughput over the timed window (slowest rank's); step time: median over steps of the "
              "slowest rank; wait: mean per step in step() waiting for allreduces\n");
  std::printf("%s\n%s\n", kCsvHeader, csv_row(o, r).c_str());
  // Rank 0's coordinator, per step (warm-up included): how many response lists and passes a
  // step costs, and its time outside the executors.
  const kolo::RuntimeStats st = kolo::runtime_stats();
  const double n = std::max(1, o.warmup + r.steps);
  std::printf("coordinator (rank 0, per step): %.1f responses, %.1f tensors, %.1f active passes, %.0f us "
              "coordinating, %.0f us executing\n",
              static_cast<double>(st.collectives) / n, static_cast<double>(st.tensors) / n,
              static_cast<double>(st.active_cycles) / n, st.coordination_seconds * 1e6 / n,
              (st.execution_seconds + st.rendezvous_seconds) * 1e6 / n);
  std::printf("images/s: %.2f per rank, %.2f total; step %.3f ms (median), of which %.3f ms (%.1f%%) waiting "
              "for allreduces (mean)\n",
              r.per_rank_ips, r.total_ips, r.step_ms_median, r.wait_ms_mean,
              r.step_ms_median > 0 ? 100.0 * r.wait_ms_mean / r.step_ms_median : 0.0);
  std::printf("rank 0's step time less its wait: p10 %.1f ms, p90 %.1f ms\n", r.compute_ms_p10, r.compute_ms_p90);
  if (r.ranks > 1) {
    std::printf("wait: %.3f ms per step even for the last rank to finish its backward pass (mean over steps of "
                "the least wait of any rank); the rest is ranks waiting for each other\n",
                r.wait_floor_ms_mean);
    std::printf("wait per rank (ms per step):");
    for (size_t i = 0; i < r.rank_wait_ms.size(); ++i) std::printf(" %zu: %.3f", i, r.rank_wait_ms[i]);
    std::printf("\n");
  }
}

// Appends one row; writes the header first when the file is new or empty, so a script can
// collect several runs into one CSV.
void append_csv(const Options& o, const Result& r) {
  const bool fresh = !std::filesystem::exists(o.csv) || std::filesystem::file_size(o.csv) == 0;
  std::ofstream f(o.csv, std::ios::app);
  if (fresh) f << kCsvHeader << '\n';
  f << csv_row(o, r) << '\n';
  if (!f) throw std::runtime_error(o.csv + ": cannot append the result");
}

void write_json(const Options& o, const Result& r) {
  const nlohmann::json j = {{"model", o.model},
                            {"device", o.device},
                            {"ranks", r.ranks},
                            {"threads_per_rank", r.threads},
                            {"batch_per_rank", r.batch},
                            {"warmup", o.warmup},
                            {"steps", r.steps},
                            {"window_s", r.window_s},
                            {"images_per_s_per_rank", r.per_rank_ips},
                            {"images_per_s_total", r.total_ips},
                            {"step_ms_median", r.step_ms_median},
                            {"allreduce_wait_ms_mean", r.wait_ms_mean},
                            {"oversubscribed", r.oversubscribed}};
  std::ofstream f(o.json);
  f << j.dump(2) << '\n';
  if (!f) throw std::runtime_error(o.json + ": cannot write the result");
}

// The trainer in throughput mode: one epoch of exactly warmup + steps batches of synthetic
// data (every rank generates the same set from the seed), no evaluation, no progress lines.
kolo::train::TrainOptions train_options(const Options& o, Samples* samples) {
  kolo::train::TrainOptions t;
  t.model = o.model;
  t.dataset = "synthetic";
  t.epochs = 1;
  t.batch_size = o.batch_size;
  t.threads = o.threads;
  t.device = o.device;
  t.gradients = o.gradients;
  t.seed = o.seed;
  t.lr = 0.01;  // random labels: a small constant rate keeps the loss finite
  t.warmup_epochs = 0;
  t.schedule = "constant";
  t.evaluate = false;
  t.verbose = false;
  t.max_batches = o.warmup + o.steps;
  t.synthetic_size = static_cast<int64_t>(o.batch_size) * kolo::size() * t.max_batches;
  const int warmup = o.warmup;
  t.on_step = [samples, warmup](const kolo::train::StepTiming& st) {
    samples->losses.push_back(st.loss);
    if (st.batch < warmup) return;
    samples->seconds.push_back(st.seconds);
    samples->images += static_cast<double>(st.images);
    samples->wait.push_back(st.allreduce_wait_seconds);
  };
  return t;
}

// The run is sound when every rank timed every step and every loss is finite; the verdict is
// agreed across ranks so that all of them exit alike.
bool sound(const Options& o, const Samples& s) {
  const bool complete = static_cast<int>(s.seconds.size()) == o.steps &&
                        static_cast<int>(s.losses.size()) == o.warmup + o.steps;
  const bool finite = std::all_of(s.losses.begin(), s.losses.end(), [](double l) { return std::isfinite(l); });
  int32_t bad = complete && finite ? 0 : 1;
  if (bad) {
    std::fprintf(stderr, "kolo-bench-train (rank %d): error: %zu of %d timed steps, %zu of %d losses recorded, %s\n",
                 kolo::rank(), s.seconds.size(), o.steps, s.losses.size(), o.warmup + o.steps,
                 finite ? "all finite" : "a loss is not finite");
  }
  kolo::allreduce(kolo::TensorView::of(&bad, kolo::Shape{1}), "bench.sound",
                  kolo::AllreduceOptions{kolo::ReduceOp::kMax});
  return bad == 0;
}

int run(Options& o) {
  if (o.batch_size == 0) o.batch_size = default_batch(o.model);
  Samples samples;
  kolo::train::run_training(train_options(o, &samples));
  if (!sound(o, samples)) return 2;
  const Result r = reduce_across_ranks(o, samples);
  if (kolo::rank() == 0) {
    print_result(o, r);
    if (!o.csv.empty()) append_csv(o, r);
    if (!o.json.empty()) write_json(o, r);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"kolo-bench-train: synthetic-data training throughput (images/s) through DistributedOptimizer"};
  app.add_option("--model", o.model, "lenet | resnet20 | resnet56 | resnet50")
      ->check(CLI::IsMember({"lenet", "resnet20", "resnet56", "resnet50"}))
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "per rank (0: lenet 64, resnet20/56 32, resnet50 4)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed steps first")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--steps", o.steps, "timed steps")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--threads", o.threads, "Eigen threads per rank")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seed", o.seed, "synthetic data and initial weights")->capture_default_str();
  app.add_option("--gradients", o.gradients,
                 "kolo (DistributedOptimizer) | mpi (baseline: one blocking MPI_Allreduce of all gradients after "
                 "the backward pass; CSV model column gets \"/mpi\")")
      ->check(CLI::IsMember({"kolo", "mpi"}))
      ->capture_default_str();
  app.add_option("--device", o.device, "cpu | gpu (GPU local_rank % GPUs; e.g. lenet batch 256, resnet50 batch 128)")
      ->check(CLI::IsMember({"cpu", "gpu"}))
      ->capture_default_str();
  app.add_option("--csv", o.csv, "append the result row here (header when the file is new)");
  app.add_option("--json", o.json, "write the result as JSON here");
  CLI11_PARSE(app, argc, argv);
  int rc = 0;
  try {
    kolo::init(&argc, &argv);
    rc = run(o);
    kolo::shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kolo-bench-train (rank %d): error: %s\n", kolo::is_initialized() ? kolo::rank() : -1,
                 e.what());
    return 1;
  }
  return rc;
}

// kolo-bench-kvstore: one training step's communication through a kolo::KVStore — every
// worker pushes a model's whole gradient set and pulls its weights back, the optimizer
// (momentum SGD) runs where the weights live — for the allreduce design ("allreduce": kolo's
// allreduce, update on every worker) and the parameter-server designs ("dist_sync" with
// KOLO_NUM_SERVERS servers). No compute: what is timed is the communication a step adds.
//
//   KOLO_NUM_SERVERS=1 mpirun -np 5 kolo-bench-kvstore --type dist_sync --workload resnet50
//
// Worker 0 prints one line and (with --csv) appends one CSV row: the median and the
// 10th/90th percentile of the step time over --steps steps (after --warmup), each step timed
// from a workers' barrier to its end and averaged over the workers, and the bytes each worker pushed.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/kvstore.h"
#include "workloads.h"

namespace {

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a;
  f >> a;
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kolo-bench-kvstore: a step's push + pull through kolo::KVStore"};
  std::string type = "allreduce", workload = "resnet50", dtype = "float32", csv, label;
  int steps = 10, warmup = 2;
  app.add_option("--type", type, "allreduce | dist_sync | dist_async")->capture_default_str();
  app.add_option("--workload", workload, "resnet50 | resnet20 | lenet | bert-base")->capture_default_str();
  app.add_option("--dtype", dtype, "float32 | float16 | bfloat16: the keys' dtype (16-bit keys travel in 16 bits)")
      ->capture_default_str()
      ->check(CLI::IsMember({"float32", "float16", "bfloat16"}));
  app.add_option("--steps", steps)->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  app.add_option("--csv", csv, "append one row here (worker 0)");
  app.add_option("--label", label, "configuration name for the CSV")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  kolo::init(&argc, &argv);
  const auto grads = kolo::bench::workload_by_name(workload);
  if (grads.empty()) {
    std::fprintf(stderr, "unknown workload %s\n", workload.c_str());
    return 2;
  }
  {
    auto kv = kolo::KVStore::create(type);
    if (kv->is_server()) {
      kv->run_server();
    } else {
      std::vector<int> keys;
      std::vector<std::vector<float>> w(grads.size()), g(grads.size());
      std::vector<std::vector<kolo::Half>> wh(grads.size()), gh(grads.size());  // --dtype float16
      std::vector<std::vector<kolo::BFloat16>> wb(grads.size()), gb(grads.size());  // bfloat16
      std::vector<kolo::TensorView> wv, gv;
      int64_t elements = 0;
      for (size_t i = 0; i < grads.size(); ++i) {
        const int64_t n = kolo::num_elements(grads[i].shape);
        elements += n;
        keys.push_back(static_cast<int>(i));
        w[i].assign(static_cast<size_t>(n), 0.01f);
        g[i].assign(static_cast<size_t>(n), 0.001f * static_cast<float>(kv->rank() + 1));
        if (dtype == "float16") {
          for (float v : w[i]) wh[i].push_back(kolo::float_to_half(v));
          for (float v : g[i]) gh[i].push_back(kolo::float_to_half(v));
          wv.push_back(kolo::TensorView::of(wh[i]));
          gv.push_back(kolo::TensorView::of(gh[i]));
        } else if (dtype == "bfloat16") {
          for (float v : w[i]) wb[i].push_back(kolo::float_to_bf16(v));
          for (float v : g[i]) gb[i].push_back(kolo::float_to_bf16(v));
          wv.push_back(kolo::TensorView::of(wb[i]));
          gv.push_back(kolo::TensorView::of(gb[i]));
        } else {
          wv.push_back(kolo::TensorView::of(w[i]));
          gv.push_back(kolo::TensorView::of(g[i]));
        }
      }
      kv->init(keys, wv);
      kolo::KVOptimizer opt;
      opt.learning_rate = 0.01;
      opt.momentum = 0.9;
      opt.rescale_grad = 1.0 / kv->num_workers();
      kv->set_optimizer(opt);
      std::vector<double> times;
      for (int s = 0; s < warmup + steps; ++s) {
        kv->barrier();
        const auto t0 = std::chrono::steady_clock::now();
        kv->push(keys, gv);
        kv->pull(keys, wv);
        double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        kv->sum_over_workers(std::span<double>(&t, 1));  // the workers' mean step time
        t /= kv->num_workers();
        if (s >= warmup) times.push_back(t);
      }
      // Every weight took the same steps: mom = 0.9 mom - lr g, w += mom, with g the mean of
      // the workers' 0.001 (rank + 1). A wrong element is an error (exit 2), not a timing.
      const int n = kv->num_workers();
      double want = 0.01, mom = 0.0;
      const double g_mean = 0.001 * (n + 1) / 2.0;
      for (int s = 0; s < warmup + steps; ++s) {
        mom = 0.9 * mom - 0.01 * g_mean;
        want += mom;
      }
      // The pulled weights are rounded to the keys' dtype (float16: 11 bits, bfloat16: 8).
      for (size_t i = 0; i < w.size(); ++i) {
        for (size_t e = 0; e < wh[i].size(); ++e) w[i][e] = kolo::half_to_float(wh[i][e]);
        for (size_t e = 0; e < wb[i].size(); ++e) w[i][e] = kolo::bf16_to_float(wb[i][e]);
      }
      const double tol = dtype == "float16" ? 1e-3 : dtype == "bfloat16" ? 8e-3 : 1e-4;
      int64_t wrong = 0;
      for (const auto& t : w)
        for (float v : t) wrong += std::abs(v - want) > tol * std::abs(want);
      if (wrong > 0) {
        std::fprintf(stderr, "kolo-bench-kvstore: worker %d: %lld weights differ from %.7f\n", kv->rank(),
                     static_cast<long long>(wrong), want);
        return 2;
      }
      if (kv->rank() == 0) {
        const double med = percentile(times, 0.5), p10 = percentile(times, 0.1), p90 = percentile(times, 0.9);
        const double mb = static_cast<double>(elements) * 4.0 / 1e6;
        const int servers = kv->num_servers();
        std::printf("kvstore %-10s %-9s %-8s workers %d servers %d: step %.2f ms (p10 %.2f, p90 %.2f), %.1f MB pushed "
                    "and pulled per worker (float32), load %s\n",
                    type.c_str(), workload.c_str(), dtype.c_str(), kv->num_workers(), servers, med * 1e3, p10 * 1e3,
                    p90 * 1e3, mb, load_average().c_str());
        if (!csv.empty()) {
          const bool fresh = !std::ifstream(csv).good();
          std::ofstream out(csv, std::ios::app);
          if (fresh) out << "label,type,workload,workers,servers,ranks,elements,median_s,p10_s,p90_s,loadavg\n";
          out << label << "," << type << "," << workload << "," << kv->num_workers() << "," << servers << ","
              << kolo::size() << "," << elements << "," << med << "," << p10 << "," << p90 << "," << load_average()
              << "\n";
        }
      }
      kv->close();
    }
  }
  kolo::shutdown();
  return 0;
}

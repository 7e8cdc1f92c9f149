// core/autotune.h — online tuning of kolo's performance knobs by Bayesian optimisation.
//
// The Autotuner proposes a setting of the tuned knobs (fusion threshold, cycle time, CPU
// chunk size: the table kTunedKnobs), watches the throughput the job reaches with it, and
// moves on to the next setting, until its budget of samples is spent; then it fixes the best.
// It is a pure component: no MPI, no threads, no clock, no files. The caller reports what
// happened (record(bytes, seconds)), applies the settings it proposes, and writes the CSV
// rows it produces (docs/autotune.md has the protocol and the wiring).
//
// Search: sample 0 is the starting setting (the user's configuration), then a seeded Latin
// hypercube of warm-up samples, then each next setting maximises expected improvement of a
// Gaussian process (core/gaussian_process.h) fitted to log(1 + bytes/s) over the knobs in
// normalised [0,1] coordinates (log scale for byte counts and times). The final choice is the
// sampled setting with the highest GP posterior mean: the GP smooths the measurement noise,
// so one lucky window does not win.
//
// Scoring: at the start and after a switch, the first `discard_windows` windows are dropped (buffers resize,
// caches warm, a list in flight still ran with the old setting); the next window of
// `records_per_sample` records (and at least `min_sample_seconds`) is scored as
// Σbytes / Σseconds.
//
// Determinism: the same options and the same sequence of record() calls give the same
// proposals and rows, bit for bit (own RNG, no library distributions) — rank 0 alone runs
// it and every rank receives its choices.
// Thread safety: none; used only by rank 0's coordinator thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/gaussian_process.h"

namespace kolo {

// The tuned knobs. To tune another: add an enum value, a row in kTunedKnobs, an accessor on
// AutotuneParams, and carry it to every rank (docs/autotune.md). A yes/no knob is a row
// with lo 0, hi 1, linear scale, quantum 1.
enum class TunedKnob : size_t { kFusionThreshold = 0, kCycleTime, kCpuChunk, kCount };
constexpr size_t kNumTunedKnobs = static_cast<size_t>(TunedKnob::kCount);

struct TunedKnobRange {
  std::string_view csv_name;
  double lo, hi;    // the search box
  bool log_scale;   // normalise log(value): a byte count or a time spans decades
  double quantum;   // values are rounded to a multiple of this (0: continuous)
};

inline constexpr std::array<TunedKnobRange, kNumTunedKnobs> kTunedKnobs = {{
    {"fusion_threshold_bytes", 64.0 * 1024, 256.0 * 1024 * 1024, true, 4096},
    {"cycle_time_ms", 0.05, 10.0, true, 0},
    {"chunk_bytes", 64.0 * 1024, 16.0 * 1024 * 1024, true, 4096},
}};

// One setting of every tuned knob, in the knobs' own units.
struct AutotuneParams {
  std::array<double, kNumTunedKnobs> values{};

  double& operator[](TunedKnob k) { return values[static_cast<size_t>(k)]; }
  double operator[](TunedKnob k) const { return values[static_cast<size_t>(k)]; }
  size_t fusion_threshold_bytes() const { return static_cast<size_t>((*this)[TunedKnob::kFusionThreshold]); }
  double cycle_time_ms() const { return (*this)[TunedKnob::kCycleTime]; }
  size_t cpu_chunk_bytes() const { return static_cast<size_t>((*this)[TunedKnob::kCpuChunk]); }
  static AutotuneParams make(size_t fusion_threshold_bytes, double cycle_time_ms, size_t cpu_chunk_bytes);

  // Clamped into the box and rounded to each knob's quantum.
  AutotuneParams snapped() const;
  // Coordinates in [0,1]^kNumTunedKnobs (log scale where the knob says so), and back.
  std::vector<double> normalised() const;
  static AutotuneParams from_normalised(const std::vector<double>& unit);

  bool operator==(const AutotuneParams&) const = default;
};

struct AutotuneOptions {
  AutotuneParams initial = AutotuneParams::make(4u << 20, 1.0, 1u << 20);  // sample 0
  uint64_t seed = 1;
  int warmup_samples = 5;         // Latin-hypercube samples after sample 0
  int max_samples = 24;           // total budget, sample 0 and warm-up included (>= 1)
  int records_per_sample = 20;    // records in one scored window (>= 1)
  double min_sample_seconds = 0;  // ... and at least this long
  int discard_windows = 1;        // windows dropped at the start and after every switch (>= 0)
  int random_candidates = 2000;   // EI is maximised over these, a grid, and moves near the best
  int grid_per_dim = 6;
  int local_candidates = 300;
  // EI's exploration margin, in units of log(1 + bytes/s): 0.01 asks for ~1% better.
  double xi = 0.01;
};

// One scored sample.
struct AutotuneSample {
  int index = 0;
  AutotuneParams params;
  double score = 0.0;  // bytes per second over the window
};

class Autotuner {
 public:
  explicit Autotuner(AutotuneOptions options);

  // Reports that `bytes` were reduced in `seconds` of wall time since the previous record()
  // (under the setting current() returned). Ignored once done().
  void record(uint64_t bytes, double seconds);

  // True when current() changed since the last take_new_params().
  bool has_new_params() const { return has_new_; }
  // The setting to apply now, or nothing if it did not change since the last call.
  std::optional<AutotuneParams> take_new_params();
  // The setting being measured (or, once done(), the chosen one).
  const AutotuneParams& current() const { return current_; }
  bool done() const { return done_; }

  const std::vector<AutotuneSample>& samples() const { return samples_; }
  // Index into samples() of the chosen setting; only meaningful once done().
  int best_sample() const { return best_; }

  // CSV: one row per scored sample (is_best 0), then, once done(), one row repeating the
  // chosen sample with is_best 1. Rows have no trailing newline.
  static std::string csv_header();  // "sample,fusion_threshold_bytes,cycle_time_ms,chunk_bytes,score_bytes_per_s,is_best"
  const std::vector<std::string>& log_rows() const { return rows_; }
  // Rows added since the last call (for streaming them to KOLO_AUTOTUNE_LOG).
  std::vector<std::string> take_new_rows();

 private:
  void finish_window();
  void add_sample(double score);
  void switch_to(const AutotuneParams& p);
  // Fits the GP to all samples; returns the index of the sample with the highest posterior
  // mean, and that mean.
  size_t fit_and_find_incumbent(double* incumbent_mean);
  AutotuneParams next_by_expected_improvement();
  std::vector<std::vector<double>> candidates(const std::vector<double>& best_unit);
  void choose_best_and_stop();
  std::string row(const AutotuneSample& s, bool is_best) const;
  double uniform();  // [0,1), from rng_state_
  double normal();

  // Constant after construction.
  const AutotuneOptions options_;

  uint64_t rng_state_;
  GaussianProcess gp_;
  std::vector<AutotuneParams> warmup_;  // Latin-hypercube points not yet measured
  std::vector<AutotuneSample> samples_;
  AutotuneParams current_;
  bool has_new_ = false;
  bool done_ = false;
  int best_ = 0;

  // The window in progress.
  int windows_to_discard_;
  int window_records_ = 0;
  uint64_t window_bytes_ = 0;
  double window_seconds_ = 0.0;

  std::vector<std::string> rows_;
  size_t rows_taken_ = 0;
};

}  // namespace kolo

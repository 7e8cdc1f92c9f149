// Bayesian-optimisation autotuner (see core/autotune.h and docs/autotune.md).
#include "core/autotune.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>

namespace kolo {
namespace {

double to_unit(const TunedKnobRange& k, double v) {
  v = std::clamp(v, k.lo, k.hi);
  return k.log_scale ? std::log(v / k.lo) / std::log(k.hi / k.lo) : (v - k.lo) / (k.hi - k.lo);
}

double from_unit(const TunedKnobRange& k, double u) {
  u = std::clamp(u, 0.0, 1.0);
  return k.log_scale ? k.lo * std::exp(u * std::log(k.hi / k.lo)) : k.lo + u * (k.hi - k.lo);
}

// The GP models log(1 + bytes/s): throughput differences between settings are multiplicative
// (a setting is "30% faster"), and so is the measurement noise; in log space both are additive.
double gp_target(double score) { return std::log1p(std::max(0.0, score)); }

}  // namespace

AutotuneParams AutotuneParams::make(size_t fusion_threshold_bytes, double cycle_time_ms, size_t cpu_chunk_bytes) {
  AutotuneParams p;
  p[TunedKnob::kFusionThreshold] = static_cast<double>(fusion_threshold_bytes);
  p[TunedKnob::kCycleTime] = cycle_time_ms;
  p[TunedKnob::kCpuChunk] = static_cast<double>(cpu_chunk_bytes);
  return p;
}

AutotuneParams AutotuneParams::snapped() const {
  AutotuneParams p;
  for (size_t i = 0; i < kNumTunedKnobs; ++i) {
    const TunedKnobRange& k = kTunedKnobs[i];
    double v = std::clamp(values[i], k.lo, k.hi);
    if (k.quantum > 0) {
      // Round, then keep within the multiples of the quantum that lie inside the box.
      v = std::round(v / k.quantum) * k.quantum;
      v = std::clamp(v, std::ceil(k.lo / k.quantum) * k.quantum, std::floor(k.hi / k.quantum) * k.quantum);
    }
    p.values[i] = v;
  }
  return p;
}

std::vector<double> AutotuneParams::normalised() const {
  std::vector<double> u(kNumTunedKnobs);
  for (size_t i = 0; i < kNumTunedKnobs; ++i) u[i] = to_unit(kTunedKnobs[i], values[i]);
  return u;
}

AutotuneParams AutotuneParams::from_normalised(const std::vector<double>& unit) {
  AutotuneParams p;
  for (size_t i = 0; i < kNumTunedKnobs; ++i) p.values[i] = from_unit(kTunedKnobs[i], unit[i]);
  return p;
}

Autotuner::Autotuner(AutotuneOptions options)
    : options_(options),
      rng_state_(options.seed),
      gp_(kNumTunedKnobs),
      current_(options.initial),
      windows_to_discard_(std::max(0, options.discard_windows)) {
  // Latin hypercube: in every dimension each of the m slices [j/m, (j+1)/m) holds exactly one
  // warm-up point, so m points already see the whole range of every knob.
  const int m = std::clamp(options_.warmup_samples, 0, std::max(0, options_.max_samples - 1));
  std::vector<std::vector<double>> unit(static_cast<size_t>(m), std::vector<double>(kNumTunedKnobs));
  for (size_t d = 0; d < kNumTunedKnobs; ++d) {
    std::vector<int> slice(static_cast<size_t>(m));
    for (int j = 0; j < m; ++j) slice[static_cast<size_t>(j)] = j;
    for (int j = m - 1; j > 0; --j) {  // Fisher–Yates on our own RNG (deterministic everywhere)
      const auto r = static_cast<int>(uniform() * (j + 1));
      std::swap(slice[static_cast<size_t>(j)], slice[static_cast<size_t>(std::min(r, j))]);
    }
    for (int j = 0; j < m; ++j) unit[static_cast<size_t>(j)][d] = (slice[static_cast<size_t>(j)] + uniform()) / m;
  }
  // Stored reversed so that the next one is popped from the back.
  for (auto it = unit.rbegin(); it != unit.rend(); ++it) warmup_.push_back(AutotuneParams::from_normalised(*it).snapped());
}

double Autotuner::uniform() {
  // splitmix64: tiny, full-period, and the same on every platform and standard library.
  uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

double Autotuner::normal() {
  // Box–Muller; 1 - u keeps the logarithm's argument in (0, 1].
  const double u1 = 1.0 - uniform(), u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

void Autotuner::record(uint64_t bytes, double seconds) {
  if (done_) return;
  window_bytes_ += bytes;
  // A clock that stepped backwards or a NaN must not poison the window.
  if (std::isfinite(seconds) && seconds > 0) window_seconds_ += seconds;
  ++window_records_;
  if (window_records_ >= std::max(1, options_.records_per_sample) && window_seconds_ >= options_.min_sample_seconds)
    finish_window();
}

void Autotuner::finish_window() {
  const double score = window_seconds_ > 0 ? static_cast<double>(window_bytes_) / window_seconds_ : 0.0;
  window_records_ = 0;
  window_bytes_ = 0;
  window_seconds_ = 0.0;
  if (windows_to_discard_ > 0) {
    --windows_to_discard_;
    return;
  }
  add_sample(score);
}

void Autotuner::add_sample(double score) {
  AutotuneSample s;
  s.index = static_cast<int>(samples_.size());
  s.params = current_;
  s.score = score;
  samples_.push_back(s);
  rows_.push_back(row(s, false));
  if (static_cast<int>(samples_.size()) >= std::max(1, options_.max_samples)) {
    choose_best_and_stop();
  } else if (!warmup_.empty()) {
    const AutotuneParams next = warmup_.back();
    warmup_.pop_back();
    switch_to(next);
  } else {
    switch_to(next_by_expected_improvement());
  }
}

void Autotuner::switch_to(const AutotuneParams& p) {
  // Measuring the same setting again needs no warm-up window: nothing changed.
  if (p == current_) return;
  current_ = p;
  has_new_ = true;
  windows_to_discard_ = std::max(0, options_.discard_windows);
}

std::optional<AutotuneParams> Autotuner::take_new_params() {
  if (!has_new_) return std::nullopt;
  has_new_ = false;
  return current_;
}

std::vector<std::vector<double>> Autotuner::candidates(const std::vector<double>& best_unit) {
  std::vector<std::vector<double>> out;
  std::vector<double> u(kNumTunedKnobs);
  for (int i = 0; i < options_.random_candidates; ++i) {
    for (double& v : u) v = uniform();
    out.push_back(u);
  }
  // A regular grid so that no region is missed by chance, cell centres.
  const int g = std::max(0, options_.grid_per_dim);
  size_t cells = g > 0 ? 1 : 0;
  for (size_t d = 0; d < kNumTunedKnobs; ++d) cells *= static_cast<size_t>(g);
  for (size_t c = 0; c < cells; ++c) {
    size_t rest = c;
    for (size_t d = 0; d < kNumTunedKnobs; ++d) {
      u[d] = (static_cast<double>(rest % static_cast<size_t>(g)) + 0.5) / g;
      rest /= static_cast<size_t>(g);
    }
    out.push_back(u);
  }
  // Moves around the best setting so far, at two step sizes: random points and the grid are
  // too coarse to climb the last few percent of a peak.
  for (int i = 0; i < options_.local_candidates; ++i) {
    const double step = i % 2 == 0 ? 0.03 : 0.12;
    for (size_t d = 0; d < kNumTunedKnobs; ++d) u[d] = std::clamp(best_unit[d] + step * normal(), 0.0, 1.0);
    out.push_back(u);
  }
  return out;
}

size_t Autotuner::fit_and_find_incumbent(double* incumbent_mean) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (const AutotuneSample& s : samples_) {
    x.push_back(s.params.normalised());
    y.push_back(gp_target(s.score));
  }
  gp_.fit(x, y);
  // The best posterior mean at a sampled setting, not the best raw score: with noisy scores
  // the raw maximum is biased upwards (a lucky window), which would make EI too timid and
  // the final choice a gamble.
  *incumbent_mean = -std::numeric_limits<double>::infinity();
  size_t at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double m = gp_.predict(x[i]).mean;
    if (m > *incumbent_mean) {
      *incumbent_mean = m;
      at = i;
    }
  }
  return at;
}

AutotuneParams Autotuner::next_by_expected_improvement() {
  double incumbent = 0.0;
  const std::vector<double> incumbent_unit = samples_[fit_and_find_incumbent(&incumbent)].params.normalised();
  double best_ei = -1.0;
  std::vector<double> best_unit = incumbent_unit;
  for (const auto& c : candidates(incumbent_unit)) {
    const GpPrediction p = gp_.predict(c);
    const double ei = expected_improvement(p.mean, p.variance, incumbent, options_.xi);
    if (ei > best_ei) {  // strictly: the first of equal candidates wins, deterministically
      best_ei = ei;
      best_unit = c;
    }
  }
  return AutotuneParams::from_normalised(best_unit).snapped();
}

void Autotuner::choose_best_and_stop() {
  double mean = 0.0;
  best_ = static_cast<int>(fit_and_find_incumbent(&mean));
  switch_to(samples_[static_cast<size_t>(best_)].params);
  done_ = true;
  rows_.push_back(row(samples_[static_cast<size_t>(best_)], true));
}

std::string Autotuner::csv_header() {
  std::string h = "sample";
  for (const TunedKnobRange& k : kTunedKnobs) {
    h += ',';
    h += k.csv_name;
  }
  return h + ",score_bytes_per_s,is_best";
}

std::string Autotuner::row(const AutotuneSample& s, bool is_best) const {
  std::string r = std::to_string(s.index);
  char buf[64];
  for (size_t i = 0; i < kNumTunedKnobs; ++i) {
    const double v = s.params.values[i];
    // Byte counts print as whole numbers (they are whole); times with 6 significant digits.
    if (kTunedKnobs[i].quantum > 0)
      std::snprintf(buf, sizeof buf, ",%" PRIu64, static_cast<uint64_t>(std::llround(v)));
    else
      std::snprintf(buf, sizeof buf, ",%.6g", v);
    r += buf;
  }
  std::snprintf(buf, sizeof buf, ",%.6e,%d", s.score, is_best ? 1 : 0);
  return r + buf;
}

std::vector<std::string> Autotuner::take_new_rows() {
  std::vector<std::string> out(rows_.begin() + static_cast<std::ptrdiff_t>(rows_taken_), rows_.end());
  rows_taken_ = rows_.size();
  return out;
}

}  // namespace kolo

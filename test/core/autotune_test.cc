// The autotuner and its Gaussian process, without peers: synthetic throughput in, settings out.
#include <catch2/catch.hpp>

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>
#include <sstream>

#include "core/autotune.h"
#include "core/gaussian_process.h"

using namespace kolo;

namespace {

// A wiggly 2-D function to interpolate.
double wiggle(const std::vector<double>& x) { return std::sin(6.0 * x[0]) + x[1] * x[1]; }

std::vector<std::vector<double>> grid_points_2d(int per_dim) {
  std::vector<std::vector<double>> out;
  for (int i = 0; i < per_dim; ++i)
    for (int j = 0; j < per_dim; ++j) out.push_back({(i + 0.5) / per_dim, (j + 0.5) / per_dim});
  return out;
}

// Synthetic job: throughput in bytes/s as a smooth bump in log(threshold) × log(cycle) ×
// log(chunk) over a floor, peaking at 24 MiB, 0.4 ms, 512 KiB. Widths in octaves.
constexpr double kPeak = 1.3e9;
double true_score(const AutotuneParams& p) {
  const double a = (std::log2(p[TunedKnob::kFusionThreshold]) - std::log2(24.0 * 1024 * 1024)) / 1.5;
  const double b = (std::log2(p[TunedKnob::kCycleTime]) - std::log2(0.4)) / 1.2;
  const double c = (std::log2(p[TunedKnob::kCpuChunk]) - std::log2(512.0 * 1024)) / 2.5;
  return 1e9 * (0.3 + std::exp(-0.5 * (a * a + b * b + c * c)));
}

// One record of a 10 ms step with 10% multiplicative noise.
void feed_one(Autotuner& tuner, std::mt19937_64& rng) {
  std::normal_distribution<double> noise(0.0, 0.1);
  const double seconds = 0.01;
  const double bytes = std::max(0.0, true_score(tuner.current()) * seconds * (1.0 + noise(rng)));
  tuner.record(static_cast<uint64_t>(bytes), seconds);
}

AutotuneOptions synthetic_options(uint64_t seed) {
  AutotuneOptions o;
  o.seed = seed;
  o.max_samples = 24;
  o.warmup_samples = 5;
  o.records_per_sample = 10;
  return o;
}

// Feeds `tuner` the synthetic job (noise drawn from `seed`) until it is done; returns the
// true score of its choice as a fraction of the peak.
double run_to_end(Autotuner& tuner, uint64_t seed) {
  std::mt19937_64 rng(seed * 7919 + 1);
  for (int i = 0; i < 100000 && !tuner.done(); ++i) feed_one(tuner, rng);
  REQUIRE(tuner.done());
  return true_score(tuner.current()) / kPeak;
}

double tune_fraction(uint64_t seed) {
  Autotuner tuner(synthetic_options(seed));
  return run_to_end(tuner, seed);
}

// Random search with the same budget and the same noisy windows: best observed wins.
double random_search_fraction(uint64_t seed) {
  const AutotuneOptions o = synthetic_options(seed);
  std::mt19937_64 rng(seed * 104729 + 3);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::normal_distribution<double> noise(0.0, 0.1);
  double best_observed = -1.0, best_true = 0.0;
  for (int s = 0; s < o.max_samples; ++s) {
    std::vector<double> u(kNumTunedKnobs);
    for (double& v : u) v = unit(rng);
    const AutotuneParams p = AutotuneParams::from_normalised(u).snapped();
    double sum = 0.0;
    for (int r = 0; r < o.records_per_sample; ++r) sum += true_score(p) * (1.0 + noise(rng));
    if (sum > best_observed) {
      best_observed = sum;
      best_true = true_score(p);
    }
  }
  return best_true / kPeak;
}

std::vector<std::string> split(const std::string& row) {
  std::vector<std::string> out;
  std::stringstream in(row);
  for (std::string cell; std::getline(in, cell, ',');) out.push_back(cell);
  return out;
}

}  // namespace

TEST_CASE("GP interpolates noiseless samples and is certain only near them", "[autotune][gp]") {
  GpOptions fixed;
  fixed.fit_hyperparameters = false;
  fixed.length_scale = 0.3;
  fixed.noise_variance = 1e-8;
  GaussianProcess gp(2, fixed);
  const auto x = grid_points_2d(4);
  std::vector<double> y;
  for (const auto& p : x) y.push_back(wiggle(p));
  gp.fit(x, y);
  REQUIRE(gp.size() == x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const GpPrediction at = gp.predict(x[i]);
    CHECK(at.mean == Approx(y[i]).margin(1e-3));
    CHECK(at.variance < 1e-5);
  }
  // Walking away from a sample (0.125, 0.125) towards the outside corner, variance grows.
  double previous = -1.0;
  for (double d : {0.0, 0.02, 0.05, 0.1}) {
    const double v = gp.predict({0.125 - d, 0.125 - d}).variance;
    CHECK(v > previous);
    previous = v;
  }
  // Far outside the data it returns to the prior: the targets' mean, the fitted signal variance.
  double mean = 0, var = 0;
  for (double v : y) mean += v / static_cast<double>(y.size());
  for (double v : y) var += (v - mean) * (v - mean) / static_cast<double>(y.size());
  CHECK(gp.predict({5.0, 5.0}).variance == Approx(gp.signal_variance() * var).epsilon(1e-6));
  CHECK(gp.predict({5.0, 5.0}).mean == Approx(mean).epsilon(1e-6));
}

TEST_CASE("GP with hyperparameters from the grid still fits noiseless data and predicts between samples",
          "[autotune][gp]") {
  GaussianProcess gp(2);
  const auto x = grid_points_2d(6);
  std::vector<double> y;
  for (const auto& p : x) y.push_back(wiggle(p));
  gp.fit(x, y);
  for (size_t i = 0; i < x.size(); ++i) CHECK(gp.predict(x[i]).mean == Approx(y[i]).margin(0.02));
  // Between the samples: within a few percent of the function's range (2).
  for (const std::vector<double>& p : {std::vector<double>{0.3, 0.4}, {0.55, 0.8}, {0.72, 0.15}})
    CHECK(gp.predict(p).mean == Approx(wiggle(p)).margin(0.08));
  CHECK(gp.noise_variance() <= 1e-3);
}

TEST_CASE("GP grid picks more noise for noisy data and a longer scale for a smooth function", "[autotune][gp]") {
  const auto x = grid_points_2d(6);
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(0.0, 0.3);
  std::vector<double> clean, noisy, rough, smooth;
  for (const auto& p : x) {
    clean.push_back(wiggle(p));
    noisy.push_back(wiggle(p) + noise(rng));
    rough.push_back(std::sin(14.0 * p[0]) * std::cos(10.0 * p[1]));
    smooth.push_back(0.5 * p[0] + 0.2 * p[1]);
  }
  GaussianProcess a(2), b(2), c(2), r(2);
  a.fit(x, clean);
  b.fit(x, noisy);
  c.fit(x, smooth);
  r.fit(x, rough);
  CHECK(b.noise_variance() > a.noise_variance());
  CHECK(c.length_scale() > r.length_scale());
  // The chosen setting is the likeliest: a fixed, worse one scores lower.
  GpOptions fixed;
  fixed.fit_hyperparameters = false;
  fixed.length_scale = 1.0;
  fixed.noise_variance = 0.2;
  GaussianProcess d(2, fixed);
  d.fit(x, clean);
  CHECK(a.log_marginal_likelihood() > d.log_marginal_likelihood());
}

TEST_CASE("GP without data is the prior", "[autotune][gp]") {
  GaussianProcess gp(3);
  gp.fit({}, {});
  const GpPrediction p = gp.predict({0.5, 0.5, 0.5});
  CHECK(p.mean == 0.0);
  CHECK(p.variance == 1.0);
}

TEST_CASE("expected improvement: closed form, zero without uncertainty or hope", "[autotune][gp]") {
  // Mean at the incumbent, unit variance: EI = σ·φ(0).
  CHECK(expected_improvement(0.0, 1.0, 0.0) == Approx(1.0 / std::sqrt(2.0 * std::numbers::pi)));
  // Certain predictions: the plain improvement, or nothing.
  CHECK(expected_improvement(2.0, 0.0, 1.5) == Approx(0.5));
  CHECK(expected_improvement(1.0, 0.0, 1.5) == 0.0);
  // Far below the incumbent with little spread: practically nothing.
  CHECK(expected_improvement(-10.0, 0.01, 0.0) < 1e-12);
  // Grows with the mean and with the uncertainty; the margin xi lowers it.
  CHECK(expected_improvement(0.5, 1.0, 0.0) > expected_improvement(0.0, 1.0, 0.0));
  CHECK(expected_improvement(0.0, 4.0, 0.0) > expected_improvement(0.0, 1.0, 0.0));
  CHECK(expected_improvement(0.0, 1.0, 0.0, 0.5) < expected_improvement(0.0, 1.0, 0.0));
}

TEST_CASE("EI is ~0 at a known best sample and positive in unexplored regions", "[autotune][gp]") {
  // Samples of a bump at (0.3, 0.3) in the lower-left quarter only.
  auto bump = [](const std::vector<double>& p) {
    return std::exp(-((p[0] - 0.3) * (p[0] - 0.3) + (p[1] - 0.3) * (p[1] - 0.3)) / 0.02);
  };
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (double a : {0.1, 0.2, 0.3, 0.4, 0.5})
    for (double b : {0.1, 0.2, 0.3, 0.4, 0.5}) {
      x.push_back({a, b});
      y.push_back(bump({a, b}));
    }
  GaussianProcess gp(2);
  gp.fit(x, y);
  const double best = gp.predict({0.3, 0.3}).mean;
  CHECK(best == Approx(1.0).margin(0.02));
  const GpPrediction at_best = gp.predict({0.3, 0.3});
  const GpPrediction far = gp.predict({0.9, 0.9});
  const double ei_best = expected_improvement(at_best.mean, at_best.variance, best);
  const double ei_far = expected_improvement(far.mean, far.variance, best);
  CHECK(ei_best < 1e-3);
  CHECK(ei_far > 1e-3);
  CHECK(ei_far > 10 * ei_best);
}

TEST_CASE("tuned parameters: box, quantum, log-scale coordinates", "[autotune]") {
  const AutotuneParams p = AutotuneParams::make(1, 100.0, (1u << 20) + 1000).snapped();
  CHECK(p.fusion_threshold_bytes() == 64u * 1024);  // clamped up to the box
  CHECK(p.cycle_time_ms() == 10.0);                 // clamped down
  CHECK(p.cpu_chunk_bytes() == (1u << 20));         // rounded to 4 KiB
  // The middle of a log-scale box is the geometric mean of its ends.
  const AutotuneParams mid = AutotuneParams::from_normalised({0.5, 0.5, 0.5});
  CHECK(mid.cycle_time_ms() == Approx(std::sqrt(0.05 * 10.0)));
  CHECK(static_cast<double>(mid.fusion_threshold_bytes()) == Approx(std::sqrt(65536.0 * 268435456.0)));
  const AutotuneParams q = AutotuneParams::make(8u << 20, 0.3, 256u << 10);
  const AutotuneParams back = AutotuneParams::from_normalised(q.normalised());
  for (size_t i = 0; i < kNumTunedKnobs; ++i) CHECK(back.values[i] == Approx(q.values[i]).epsilon(1e-9));
}

TEST_CASE("a sample is scored over one window after a discarded warm-up window", "[autotune]") {
  AutotuneOptions o;
  o.records_per_sample = 4;
  o.discard_windows = 1;
  o.max_samples = 3;
  o.warmup_samples = 2;
  Autotuner tuner(o);
  CHECK_FALSE(tuner.has_new_params());  // sample 0 is the configuration already in force
  CHECK(tuner.current() == o.initial);
  // The first window (start-up) is dropped, whatever it measured.
  for (int i = 0; i < 4; ++i) tuner.record(1'000'000'000, 0.001);
  CHECK(tuner.samples().empty());
  // Scored: 4 records, 400 bytes in 4 s = 100 B/s; uneven records are summed, not averaged.
  tuner.record(50, 1.0);
  tuner.record(150, 1.0);
  tuner.record(100, 1.5);
  CHECK(tuner.samples().empty());
  tuner.record(100, 0.5);
  REQUIRE(tuner.samples().size() == 1);
  CHECK(tuner.samples()[0].score == Approx(100.0));
  CHECK(tuner.samples()[0].params == o.initial);
  // A switch: the new setting is offered once.
  REQUIRE(tuner.has_new_params());
  const auto next = tuner.take_new_params();
  REQUIRE(next.has_value());
  CHECK_FALSE(tuner.take_new_params().has_value());
  CHECK(*next == tuner.current());
  CHECK_FALSE(*next == o.initial);
  // After the switch the first window is dropped again; the second scores.
  for (int i = 0; i < 4; ++i) tuner.record(7, 1.0);
  CHECK(tuner.samples().size() == 1);
  for (int i = 0; i < 4; ++i) tuner.record(300, 1.0);
  REQUIRE(tuner.samples().size() == 2);
  CHECK(tuner.samples()[1].score == Approx(300.0));
  // Third and last sample: done, and the best (300 B/s) is put back in force.
  tuner.take_new_params();
  for (int i = 0; i < 8; ++i) tuner.record(10, 1.0);
  REQUIRE(tuner.done());
  CHECK(tuner.best_sample() == 1);
  CHECK(tuner.current() == tuner.samples()[1].params);
  CHECK(tuner.take_new_params() == tuner.samples()[1].params);
  // Later records change nothing.
  for (int i = 0; i < 20; ++i) tuner.record(1'000'000, 1.0);
  CHECK(tuner.samples().size() == 3);
  CHECK_FALSE(tuner.has_new_params());
}

TEST_CASE("a window lasts at least min_sample_seconds; bad durations are ignored", "[autotune]") {
  AutotuneOptions o;
  o.records_per_sample = 2;
  o.min_sample_seconds = 1.0;
  o.discard_windows = 0;
  Autotuner tuner(o);
  tuner.record(100, 0.25);
  tuner.record(100, -3.0);  // a clock step backwards adds nothing
  tuner.record(100, std::nan(""));
  CHECK(tuner.samples().empty());
  tuner.record(100, 0.75);
  REQUIRE(tuner.samples().size() == 1);
  CHECK(tuner.samples()[0].score == Approx(400.0));
}

TEST_CASE("warm-up samples form a Latin hypercube: one per slice of every knob's range", "[autotune]") {
  AutotuneOptions o = synthetic_options(11);
  o.warmup_samples = 5;
  Autotuner tuner(o);
  run_to_end(tuner, 11);
  REQUIRE(tuner.samples().size() > 6);
  for (size_t d = 0; d < kNumTunedKnobs; ++d) {
    std::vector<int> per_slice(5, 0);
    for (size_t i = 1; i <= 5; ++i) {  // sample 0 is the initial setting
      const double u = tuner.samples()[i].params.normalised()[d];
      ++per_slice[static_cast<size_t>(std::min(4.0, std::floor(u * 5.0 + 1e-9)))];
    }
    CHECK(per_slice == std::vector<int>(5, 1));
  }
}

TEST_CASE("the tuner finds the peak of a noisy synthetic throughput and beats random search", "[autotune]") {
  double tuned_sum = 0, random_sum = 0, worst = 1.0;
  const int seeds = 10;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const double t = tune_fraction(seed);
    tuned_sum += t;
    random_sum += random_search_fraction(seed);
    worst = std::min(worst, t);
  }
  const double tuned = tuned_sum / seeds, random = random_sum / seeds;
  INFO("tuned mean " << tuned << ", random search mean " << random << ", tuned worst " << worst);
  CHECK(tuned >= 0.95);
  CHECK(worst >= 0.8);
  CHECK(tuned > random + 0.05);
}

TEST_CASE("same seed and same records give the same proposals and rows; another seed differs", "[autotune]") {
  Autotuner a(synthetic_options(42)), b(synthetic_options(42)), c(synthetic_options(43));
  run_to_end(a, 42);
  run_to_end(b, 42);
  run_to_end(c, 43);
  CHECK(a.log_rows() == b.log_rows());
  REQUIRE(a.samples().size() == b.samples().size());
  for (size_t i = 0; i < a.samples().size(); ++i) CHECK(a.samples()[i].params == b.samples()[i].params);
  CHECK(a.log_rows() != c.log_rows());
}

TEST_CASE("CSV rows are well formed: one per sample, then the choice marked is_best", "[autotune]") {
  Autotuner tuner(synthetic_options(3));
  run_to_end(tuner, 3);
  CHECK(Autotuner::csv_header() == "sample,fusion_threshold_bytes,cycle_time_ms,chunk_bytes,score_bytes_per_s,is_best");
  const auto& rows = tuner.log_rows();
  REQUIRE(rows.size() == tuner.samples().size() + 1);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto cells = split(rows[i]);
    REQUIRE(cells.size() == 6);
    const bool last = i + 1 == rows.size();
    const auto& s = tuner.samples()[last ? static_cast<size_t>(tuner.best_sample()) : i];
    CHECK(std::stoi(cells[0]) == s.index);
    CHECK(std::stoull(cells[1]) == s.params.fusion_threshold_bytes());
    CHECK(std::stod(cells[2]) == Approx(s.params.cycle_time_ms()).epsilon(1e-5));
    CHECK(std::stoull(cells[3]) == s.params.cpu_chunk_bytes());
    CHECK(std::stod(cells[4]) == Approx(s.score).epsilon(1e-5));
    CHECK(cells[5] == (last ? "1" : "0"));
    CHECK(s.params.fusion_threshold_bytes() % 4096 == 0);
    CHECK(s.params.cycle_time_ms() >= 0.05);
    CHECK(s.params.cycle_time_ms() <= 10.0);
  }
  // Streaming: every row once, in order.
  Autotuner fresh(synthetic_options(3));
  std::mt19937_64 rng(3 * 7919 + 1);
  std::vector<std::string> streamed;
  while (!fresh.done()) {
    feed_one(fresh, rng);
    for (const std::string& r : fresh.take_new_rows()) streamed.push_back(r);
  }
  CHECK(streamed == rows);
  CHECK(fresh.take_new_rows().empty());
}

// Not run by default: prints the tuning quality over many seeds (docs/autotune.md quotes it).
TEST_CASE("tuning quality over 50 seeds", "[.][autotune-report]") {
  double t_sum = 0, r_sum = 0, t_min = 1, r_min = 1;
  int t_95 = 0, r_95 = 0;
  const int seeds = 50;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const double t = tune_fraction(seed), r = random_search_fraction(seed);
    t_sum += t;
    r_sum += r;
    t_min = std::min(t_min, t);
    r_min = std::min(r_min, r);
    t_95 += t >= 0.95;
    r_95 += r >= 0.95;
  }
  std::printf("autotuner:     mean %.3f  worst %.3f  >=95%% of peak in %d/%d\n", t_sum / seeds, t_min, t_95, seeds);
  std::printf("random search: mean %.3f  worst %.3f  >=95%% of peak in %d/%d\n", r_sum / seeds, r_min, r_95, seeds);
}

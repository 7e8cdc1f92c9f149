// core/gaussian_process.h — a small Gaussian-process regressor and the expected-improvement
// acquisition, for the autotuner (core/autotune.h).
//
// Inputs are points in [0,1]^d (the caller normalises); targets are standardised internally
// (mean 0, variance 1). The kernel is s²·(k(x,x') + noise·δ): the noise is relative to the
// signal variance s², and s² is profiled out (closed form) at every fit.
// Kernel: Matérn 5/2 with one length scale for all dimensions — smooth enough to extrapolate
// a few samples, rough enough to follow a throughput curve with a knee. The length scale and
// the noise are either fixed or chosen from a small grid by log marginal likelihood: with
// tens of samples a grid is cheap, deterministic and never diverges, unlike gradient ascent.
//
// Eigen is used only in gaussian_process.cc (compile time; no Eigen type in this header).
// Ownership: a GaussianProcess owns copies of its training data.
// Thread safety: none; used only by rank 0's coordinator thread (and by tests).
#pragma once

#include <cstddef>
#include <vector>

namespace kolo {

struct GpOptions {
  // Fixed hyperparameters, used when `fit_hyperparameters` is false. The noise variance is
  // relative to the signal variance.
  double length_scale = 0.25;
  double noise_variance = 1e-4;
  // Choose both from a grid by log marginal likelihood at every fit().
  bool fit_hyperparameters = true;
};

struct GpPrediction {
  double mean = 0.0;      // in the targets' units
  double variance = 0.0;  // of the latent function (noise excluded), in the targets' units squared
};

class GaussianProcess {
 public:
  explicit GaussianProcess(size_t dims, GpOptions options = {});

  // Replaces the training data with `x` (x.size() points of dims() coordinates each) and `y`,
  // and refits. An empty `x` gives the prior (mean 0, variance 1).
  // REQUIRES: x.size() == y.size(); every point has dims() coordinates.
  void fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y);

  GpPrediction predict(const std::vector<double>& point) const;

  size_t dims() const { return dims_; }
  size_t size() const { return y_.size(); }
  // Hyperparameters in use (chosen by the last fit() when fitting is on).
  double length_scale() const { return length_scale_; }
  double noise_variance() const { return noise_variance_; }
  // Signal variance s² in units of the targets' variance (profiled; 1 before any fit).
  double signal_variance() const { return signal_variance_; }
  // Log marginal likelihood of the standardised targets under the hyperparameters in use,
  // maximised over the signal variance.
  double log_marginal_likelihood() const { return log_likelihood_; }

 private:
  // Factorises K + noise·I for the given hyperparameters; returns false when not positive
  // definite. On success fills chol_, alpha_, signal_variance_ and *log_likelihood.
  bool factorise(double length_scale, double noise_variance, double* log_likelihood);
  double kernel(const double* a, const double* b) const;

  // Constant after construction.
  const size_t dims_;
  const GpOptions options_;

  // Training data and the fitted state (row-major n×n lower Cholesky factor).
  std::vector<double> x_;  // n × dims_, row-major
  std::vector<double> y_;  // standardised
  double y_mean_ = 0.0, y_scale_ = 1.0;
  double length_scale_, noise_variance_;
  double signal_variance_ = 1.0;
  double log_likelihood_ = 0.0;
  std::vector<double> chol_;
  std::vector<double> alpha_;  // (K + noise·I)^-1 y
};

// Expected improvement over `best` of a maximised objective whose prediction at a point is
// N(mean, variance): E[max(f - best - xi, 0)]. Closed form; zero where variance is zero and
// mean is not above best + xi. `xi` >= 0 trades exploitation for exploration.
double expected_improvement(double mean, double variance, double best, double xi = 0.0);

}  // namespace kolo

// Gaussian-process regression on Eigen (see core/gaussian_process.h).
#include "core/gaussian_process.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

namespace kolo {
namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// The grid searched by log marginal likelihood. Inputs live in [0,1]^d, so length scales
// from 1/20 of the box (a narrow peak) to the whole box (a near-linear trend). Noise in
// units of the standardised targets: from nearly noiseless to a fifth of their variance.
constexpr double kLengthScales[] = {0.05, 0.1, 0.15, 0.25, 0.4, 0.6, 1.0};
constexpr double kNoiseVariances[] = {1e-6, 1e-4, 1e-3, 1e-2, 0.05, 0.2};
// Added to the diagonal on top of the noise so that nearly equal points stay factorisable.
constexpr double kJitter = 1e-10;

}  // namespace

GaussianProcess::GaussianProcess(size_t dims, GpOptions options)
    : dims_(dims),
      options_(options),
      length_scale_(options.length_scale),
      noise_variance_(options.noise_variance) {}

double GaussianProcess::kernel(const double* a, const double* b) const {
  double r2 = 0.0;
  for (size_t k = 0; k < dims_; ++k) r2 += (a[k] - b[k]) * (a[k] - b[k]);
  const double s = std::sqrt(5.0 * r2) / length_scale_;
  return (1.0 + s + s * s / 3.0) * std::exp(-s);
}

bool GaussianProcess::factorise(double length_scale, double noise_variance, double* log_likelihood) {
  length_scale_ = length_scale;
  noise_variance_ = noise_variance;
  const auto n = static_cast<Eigen::Index>(y_.size());
  Eigen::MatrixXd k(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j <= i; ++j)
      k(i, j) = k(j, i) = kernel(&x_[static_cast<size_t>(i) * dims_], &x_[static_cast<size_t>(j) * dims_]);
  k.diagonal().array() += noise_variance + kJitter;
  Eigen::LLT<Eigen::MatrixXd> llt(k);
  if (llt.info() != Eigen::Success) return false;
  const Eigen::Map<const Eigen::VectorXd> y(y_.data(), n);
  const Eigen::VectorXd alpha = llt.solve(y);
  const Eigen::MatrixXd lower = llt.matrixL();
  // The signal variance s² scales K + noise·I as a whole, so its best value has a closed form,
  // s² = yᵀ(K + noise·I)⁻¹y / n, and the likelihood profiled over it is
  //   log p(y) = -n/2 (log s² + 1 + log 2π) - Σ log L_ii.
  // Profiling lets the grid weigh "rough signal" against "smooth signal plus noise" fairly;
  // with s² pinned to 1 a noisy data set would be explained as a rough one.
  const double nd = static_cast<double>(n);
  signal_variance_ = std::max(1e-12, y.dot(alpha) / nd);
  *log_likelihood = -0.5 * nd * (std::log(signal_variance_) + 1.0 + std::log(2.0 * std::numbers::pi)) -
                    lower.diagonal().array().log().sum();
  alpha_.assign(alpha.data(), alpha.data() + n);
  chol_.resize(static_cast<size_t>(n * n));
  Eigen::Map<RowMatrix>(chol_.data(), n, n) = lower;
  return true;
}

void GaussianProcess::fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y) {
  x_.clear();
  alpha_.clear();  // predict() falls back to the prior if no factorisation succeeds
  for (const auto& p : x) x_.insert(x_.end(), p.begin(), p.end());
  // Standardise: the kernel's signal variance is then 1 whatever the targets' units.
  const double n = static_cast<double>(y.size());
  y_mean_ = 0.0;
  for (double v : y) y_mean_ += v / n;
  double var = 0.0;
  for (double v : y) var += (v - y_mean_) * (v - y_mean_) / n;
  y_scale_ = var > 1e-24 ? std::sqrt(var) : 1.0;
  if (y.empty()) y_mean_ = 0.0;
  y_.clear();
  for (double v : y) y_.push_back((v - y_mean_) / y_scale_);

  if (y_.empty()) {  // the prior: predict() answers it without a factorisation
    signal_variance_ = 1.0;
    log_likelihood_ = 0.0;
    return;
  }
  if (!options_.fit_hyperparameters) {
    if (!factorise(options_.length_scale, options_.noise_variance, &log_likelihood_))
      factorise(options_.length_scale, options_.noise_variance + 1e-6, &log_likelihood_);
    return;
  }
  double best = -std::numeric_limits<double>::infinity();
  double best_l = options_.length_scale, best_noise = options_.noise_variance;
  for (double l : kLengthScales) {
    for (double noise : kNoiseVariances) {
      double ll = 0.0;
      // Strictly greater: ties keep the earlier (shorter, quieter) setting — deterministic.
      if (factorise(l, noise, &ll) && ll > best) {
        best = ll;
        best_l = l;
        best_noise = noise;
      }
    }
  }
  factorise(best_l, best_noise, &log_likelihood_);
}

GpPrediction GaussianProcess::predict(const std::vector<double>& point) const {
  const auto n = static_cast<Eigen::Index>(y_.size());
  if (n == 0 || alpha_.size() != y_.size()) return {y_mean_, y_scale_ * y_scale_};
  Eigen::VectorXd k(n);
  for (Eigen::Index i = 0; i < n; ++i) k(i) = kernel(point.data(), &x_[static_cast<size_t>(i) * dims_]);
  const Eigen::Map<const Eigen::VectorXd> alpha(alpha_.data(), n);
  const Eigen::Map<const RowMatrix> lower(chol_.data(), n, n);
  // v = L⁻¹k*; latent variance = s²(k(x,x) - vᵀv), with k(x,x) = 1. The mean does not
  // depend on s² (it cancels between k* and K).
  const Eigen::VectorXd v = lower.triangularView<Eigen::Lower>().solve(k);
  const double var = signal_variance_ * std::max(0.0, 1.0 - v.squaredNorm());
  return {y_mean_ + y_scale_ * k.dot(alpha), var * y_scale_ * y_scale_};
}

double expected_improvement(double mean, double variance, double best, double xi) {
  const double improvement = mean - best - xi;
  const double sigma = std::sqrt(std::max(0.0, variance));
  if (sigma < 1e-12) return std::max(0.0, improvement);
  const double z = improvement / sigma;
  const double cdf = 0.5 * std::erfc(-z / std::numbers::sqrt2);
  const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2.0 * std::numbers::pi);
  return std::max(0.0, improvement * cdf + sigma * pdf);
}

}  // namespace kolo

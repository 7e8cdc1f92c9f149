// Rng transforms and initialisers.
#include "nn/random.h"

#include <cmath>
#include <numbers>
#include <sstream>
#include <stdexcept>

namespace kolo::nn {

double Rng::uniform() {
  // 53 random bits -> [0, 1) exactly representable doubles.
  return static_cast<double>(engine_() >> 11) * 0x1.0p-53;
}

uint64_t Rng::below(uint64_t n) {
  // Rejection sampling removes the modulo bias.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t v;
  do {
    v = engine_();
  } while (v >= limit);
  return v % n;
}

double Rng::normal() {
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

std::string Rng::state() const {
  std::ostringstream os;
  os << engine_;
  return os.str();
}

void Rng::set_state(const std::string& s) {
  std::istringstream is(s);
  std::mt19937_64 e;
  is >> e;
  if (is.fail()) throw std::invalid_argument("random engine state is malformed");
  engine_ = e;
}

void kaiming_normal(float* w, size_t n, int fan_in, Rng& rng) {
  const double std = std::sqrt(2.0 / fan_in);
  for (size_t i = 0; i < n; ++i) w[i] = static_cast<float>(rng.normal() * std);
}

void xavier_uniform(float* w, size_t n, int fan_in, int fan_out, Rng& rng) {
  const double a = std::sqrt(6.0 / (fan_in + fan_out));
  for (size_t i = 0; i < n; ++i) w[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * a);
}

void uniform_fan_in(float* w, size_t n, int fan_in, Rng& rng) {
  const double a = 1.0 / std::sqrt(static_cast<double>(fan_in));
  for (size_t i = 0; i < n; ++i) w[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * a);
}

}  // namespace kolo::nn

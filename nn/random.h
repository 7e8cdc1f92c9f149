// nn/random.h — the trainer's seeded random source and parameter initialisers.
//
// One engine type everywhere (std::mt19937_64) so that a seed fully determines
// initialisation, shuffles and dropout masks, and its state can be saved in a checkpoint
// and restored bit-exactly. Distributions are drawn with our own transforms (not
// std::normal_distribution, whose algorithm is implementation-defined) so results do not
// depend on the standard library.
// Thread safety: an Rng is a value; do not share one between threads.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace kolo::nn {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : engine_(seed) {}
  uint64_t next_u64() { return engine_(); }
  // Uniform in [0, 1).
  double uniform();
  // Uniform integer in [0, n). REQUIRES: n > 0.
  uint64_t below(uint64_t n);
  // Standard normal (Box-Muller).
  double normal();

  // Text form of the engine state, for checkpoints.
  std::string state() const;
  // Throws std::invalid_argument when `s` is not a state produced by state().
  void set_state(const std::string& s);

 private:
  std::mt19937_64 engine_;
};

// He/Kaiming normal: N(0, 2/fan_in) — for layers followed by ReLU.
void kaiming_normal(float* w, size_t n, int fan_in, Rng& rng);
// Glorot/Xavier uniform: U(-a, a), a = sqrt(6/(fan_in+fan_out)).
void xavier_uniform(float* w, size_t n, int fan_in, int fan_out, Rng& rng);
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) — PyTorch's default for a classifier's bias/weight.
void uniform_fan_in(float* w, size_t n, int fan_in, Rng& rng);

}  // namespace kolo::nn

// Warm-up, then constant, step or cosine learning rates.
#include "optimizer/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace kolo {

double LrSchedule::rate(double epoch) const {
  if (epoch < warmup_epochs) {
    const double f = epoch / warmup_epochs;
    return base_lr * (warmup_start + (1.0 - warmup_start) * f);
  }
  switch (kind) {
    case Kind::kConstant: return base_lr;
    case Kind::kStep: {
      double lr = base_lr;
      for (double m : milestones) {
        if (epoch >= m) lr *= gamma;
      }
      return lr;
    }
    case Kind::kCosine: {
      const double span = std::max(total_epochs - warmup_epochs, 1e-9);
      const double progress = std::clamp((epoch - warmup_epochs) / span, 0.0, 1.0);
      return base_lr * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    }
  }
  return base_lr;
}

LrSchedule LrSchedule::with_world_size(int size) const {
  LrSchedule s = *this;
  s.base_lr *= size;
  return s;
}

LrSchedule::Kind LrSchedule::parse_kind(const std::string& s) {
  if (s == "cosine") return Kind::kCosine;
  if (s == "step") return Kind::kStep;
  if (s == "constant") return Kind::kConstant;
  throw std::invalid_argument("unknown learning-rate schedule \"" + s +
                              "\" (known: constant, step, cosine)");
}

}  // namespace kolo

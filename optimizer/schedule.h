// optimizer/schedule.h — learning rate as a function of training progress.
//
// rate(epoch) with a fractional epoch (e.g. 2.5 = halfway through the third epoch):
//   warm-up: for epoch < warmup_epochs, grows linearly from base*warmup_start to base
//            (the "gradual warm-up" of Goyal et al. for large global batches);
//   then:    constant; step (multiply by gamma at each milestone epoch); or cosine
//            (base * (1+cos(pi*progress))/2 over the remaining epochs, down to 0).
// with_world_size() applies the linear scaling rule: base rate times the number of ranks.
// Thread safety: a value; const methods from any thread.
#pragma once

#include <string>
#include <vector>

namespace kolo {

struct LrSchedule {
  enum class Kind { kConstant, kStep, kCosine };
  double base_lr = 0.1;
  double warmup_epochs = 0.0;
  double warmup_start = 0.1;  // fraction of base_lr at epoch 0
  Kind kind = Kind::kConstant;
  std::vector<double> milestones;  // kStep
  double gamma = 0.1;              // kStep
  double total_epochs = 1.0;       // kCosine

  double rate(double epoch) const;
  LrSchedule with_world_size(int size) const;
  // "cosine", "step", "constant"; throws std::invalid_argument for other names.
  static Kind parse_kind(const std::string& s);
};

}  // namespace kolo

// optimizer/optimizer.h — optimizers that update a model's parameter buffer from its
// gradient buffer in one pass: SGD (momentum, Nesterov, weight decay) and Adam/AdamW.
//
// Semantics follow PyTorch's torch.optim so results can be compared with it:
//   SGD:   g = grad + wd*p;  buf = momentum*buf + g;  g = nesterov ? g + momentum*buf : buf;
//          p -= lr*g           (plain SGD when momentum = 0)
//   Adam:  g = grad + wd*p (Adam) — or p -= lr*wd*p first (AdamW, decoupled);
//          m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;
//          p -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)
// State (momentum buffers, moments, the step count t) is exposed through state() so that
// checkpoints can save it and broadcast_optimizer_state() can copy it between ranks.
// Ownership: an optimizer refers to (does not own) the ParamStore, which must outlive it.
// Thread safety: none; the training thread calls it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nn/checkpoint.h"
#include "nn/params.h"

namespace kolo {

class Optimizer {
 public:
  // A named state buffer, the same length as the parameter buffer.
  using StateBuffer = std::pair<std::string, std::span<float>>;

  Optimizer(nn::ParamStore& params, double lr) : params_(params), lr_(lr) {}
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Applies one update from the gradients currently in params().grads().
  virtual void step() = 0;
  void zero_grad() { params_.zero_grads(); }

  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  // Updates applied so far (Adam's t).
  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }
  virtual std::vector<StateBuffer> state() { return {}; }
  virtual std::string kind() const = 0;
  nn::ParamStore& params() { return params_; }

 protected:
  nn::ParamStore& params_;
  double lr_;
  int64_t steps_ = 0;
};

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  // Throws std::invalid_argument for a negative rate/momentum/decay, or Nesterov
  // without momentum.
  SGD(nn::ParamStore& params, const SgdOptions& o);
  void step() override;
  std::vector<StateBuffer> state() override;
  std::string kind() const override { return "sgd"; }

 private:
  SgdOptions opt_;
  std::vector<float> momentum_;  // empty when momentum == 0
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = false;  // true: AdamW
};

class Adam : public Optimizer {
 public:
  Adam(nn::ParamStore& params, const AdamOptions& o);
  void step() override;
  std::vector<StateBuffer> state() override;
  std::string kind() const override { return opt_.decoupled ? "adamw" : "adam"; }

 private:
  AdamOptions opt_;
  std::vector<float> m_, v_;
};

// Sections "optimizer.*" of a checkpoint: kind, step count, rate and every state buffer.
// load_optimizer throws nn::CheckpointError when the kind or a buffer's size differs.
void save_optimizer(nn::Checkpoint& ck, Optimizer& opt);
void load_optimizer(const nn::Checkpoint& ck, Optimizer& opt);

}  // namespace kolo

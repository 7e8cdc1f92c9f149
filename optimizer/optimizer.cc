// SGD and Adam/AdamW update loops over the whole parameter buffer.
#include "optimizer/optimizer.h"

#include <cmath>
#include <stdexcept>

namespace kolo {

SGD::SGD(nn::ParamStore& params, const SgdOptions& o) : Optimizer(params, o.lr), opt_(o) {
  if (o.lr < 0 || o.momentum < 0 || o.weight_decay < 0) {
    throw std::invalid_argument("SGD: lr, momentum and weight decay must be >= 0");
  }
  if (o.nesterov && o.momentum <= 0) throw std::invalid_argument("SGD: Nesterov needs momentum > 0");
  if (o.momentum > 0) momentum_.assign(params.total_size(), 0.0f);
}

void SGD::step() {
  auto p = params_.values();
  auto g = params_.grads();
  const auto lr = static_cast<float>(lr_), wd = static_cast<float>(opt_.weight_decay);
  const auto mu = static_cast<float>(opt_.momentum);
  const size_t n = p.size();
  if (momentum_.empty()) {
    for (size_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + wd * p[i]);
  } else if (opt_.nesterov) {
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i] + wd * p[i];
      momentum_[i] = mu * momentum_[i] + gi;
      p[i] -= lr * (gi + mu * momentum_[i]);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      momentum_[i] = mu * momentum_[i] + g[i] + wd * p[i];
      p[i] -= lr * momentum_[i];
    }
  }
  ++steps_;
}

std::vector<Optimizer::StateBuffer> SGD::state() {
  if (momentum_.empty()) return {};
  return {{"momentum", momentum_}};
}

Adam::Adam(nn::ParamStore& params, const AdamOptions& o) : Optimizer(params, o.lr), opt_(o) {
  if (o.lr < 0 || o.weight_decay < 0 || o.eps <= 0 || o.beta1 < 0 || o.beta1 >= 1 ||
      o.beta2 < 0 || o.beta2 >= 1) {
    throw std::invalid_argument("Adam: needs lr >= 0, wd >= 0, eps > 0, betas in [0,1)");
  }
  m_.assign(params.total_size(), 0.0f);
  v_.assign(params.total_size(), 0.0f);
}

void Adam::step() {
  ++steps_;
  auto p = params_.values();
  auto g = params_.grads();
  const auto b1 = static_cast<float>(opt_.beta1), b2 = static_cast<float>(opt_.beta2);
  const auto wd = static_cast<float>(opt_.weight_decay), eps = static_cast<float>(opt_.eps);
  const auto lr = static_cast<float>(lr_);
  const auto t = static_cast<double>(steps_);
  const auto c1 = static_cast<float>(1.0 / (1.0 - std::pow(opt_.beta1, t)));
  const auto c2 = static_cast<float>(1.0 / (1.0 - std::pow(opt_.beta2, t)));
  for (size_t i = 0; i < p.size(); ++i) {
    float gi = g[i];
    if (opt_.decoupled) p[i] -= lr * wd * p[i];
    else gi += wd * p[i];
    m_[i] = b1 * m_[i] + (1.0f - b1) * gi;
    v_[i] = b2 * v_[i] + (1.0f - b2) * gi * gi;
    p[i] -= lr * (m_[i] * c1) / (std::sqrt(v_[i] * c2) + eps);
  }
}

std::vector<Optimizer::StateBuffer> Adam::state() { return {{"exp_avg", m_}, {"exp_avg_sq", v_}}; }

void save_optimizer(nn::Checkpoint& ck, Optimizer& opt) {
  ck.put_string("optimizer.kind", opt.kind());
  ck.put_i64("optimizer.steps", opt.steps());
  ck.put_floats("optimizer.lr", std::vector<float>{static_cast<float>(opt.lr())});
  for (auto& [name, buf] : opt.state()) ck.put_floats("optimizer." + name, buf);
}

void load_optimizer(const nn::Checkpoint& ck, Optimizer& opt) {
  const std::string kind = ck.get_string("optimizer.kind");
  if (kind != opt.kind()) {
    throw nn::CheckpointError("checkpoint holds " + kind + " optimizer state, but this run uses " +
                              opt.kind());
  }
  opt.set_steps(ck.get_i64("optimizer.steps"));
  float lr = 0.0f;
  ck.get_floats("optimizer.lr", std::span<float>(&lr, 1));
  opt.set_lr(lr);
  for (auto& [name, buf] : opt.state()) ck.get_floats("optimizer." + name, buf);
}

}  // namespace kolo

// GpuOptimizer: option checks, state buffers, one update kernel per step, state transfer.
#include "nn/gpu/optimizer.h"

#include <cmath>
#include <stdexcept>

#include "nn/gpu/kernels.h"

namespace kolo::nn::gpu {

GpuOptimizer::GpuOptimizer(DeviceParams& params, GpuContext& ctx, std::string kind, double lr)
    : params_(params), ctx_(ctx), kind_(std::move(kind)), lr_(lr) {}

GpuOptimizer::~GpuOptimizer() {
  for (auto& [name, p] : state_) cudaFree(p);
}

float* GpuOptimizer::add_state(const std::string& name) {
  const size_t bytes = (params_.total_size() == 0 ? 1 : params_.total_size()) * sizeof(float);
  float* p = nullptr;
  KOLO_NN_CUDA(cudaMalloc(reinterpret_cast<void**>(&p), bytes));
  state_.emplace_back(name, p);
  // On the context's stream: a plain cudaMemset would run on the legacy default stream,
  // which the (non-blocking) stream that step() uses does not wait for.
  KOLO_NN_CUDA(cudaMemsetAsync(p, 0, bytes, ctx_.stream()));
  return p;
}

std::unique_ptr<GpuOptimizer> GpuOptimizer::sgd(DeviceParams& params, GpuContext& ctx, const SgdOptions& o) {
  if (o.lr < 0 || o.momentum < 0 || o.weight_decay < 0) {
    throw std::invalid_argument("SGD: lr, momentum and weight decay must be >= 0");
  }
  if (o.nesterov && o.momentum <= 0) throw std::invalid_argument("SGD: Nesterov needs momentum > 0");
  std::unique_ptr<GpuOptimizer> opt(new GpuOptimizer(params, ctx, "sgd", o.lr));
  opt->sgd_ = o;
  if (o.momentum > 0) opt->add_state("momentum");
  return opt;
}

std::unique_ptr<GpuOptimizer> GpuOptimizer::adam(DeviceParams& params, GpuContext& ctx, const AdamOptions& o) {
  if (o.lr < 0 || o.weight_decay < 0 || o.eps <= 0 || o.beta1 < 0 || o.beta1 >= 1 || o.beta2 < 0 || o.beta2 >= 1) {
    throw std::invalid_argument("Adam: needs lr >= 0, wd >= 0, eps > 0, betas in [0,1)");
  }
  std::unique_ptr<GpuOptimizer> opt(new GpuOptimizer(params, ctx, o.decoupled ? "adamw" : "adam", o.lr));
  opt->adam_ = o;
  opt->add_state("exp_avg");
  opt->add_state("exp_avg_sq");
  return opt;
}

void GpuOptimizer::step() {
  ++steps_;
  const auto n = static_cast<int64_t>(params_.total_size());
  if (kind_ == "sgd") {
    SgdStep s{static_cast<float>(lr_), static_cast<float>(sgd_.weight_decay), static_cast<float>(sgd_.momentum),
              sgd_.nesterov};
    sgd_update(params_.values(), params_.grads(), state_.empty() ? nullptr : state_[0].second, n, s, ctx_.stream());
    return;
  }
  const auto t = static_cast<double>(steps_);
  AdamStep a;
  a.lr = static_cast<float>(lr_);
  a.beta1 = static_cast<float>(adam_.beta1);
  a.beta2 = static_cast<float>(adam_.beta2);
  a.eps = static_cast<float>(adam_.eps);
  a.weight_decay = static_cast<float>(adam_.weight_decay);
  a.c1 = static_cast<float>(1.0 / (1.0 - std::pow(adam_.beta1, t)));
  a.c2 = static_cast<float>(1.0 / (1.0 - std::pow(adam_.beta2, t)));
  a.decoupled = adam_.decoupled;
  adam_update(params_.values(), params_.grads(), state_[0].second, state_[1].second, n, a, ctx_.stream());
}

void GpuOptimizer::check_kind(Optimizer& cpu) const {
  if (cpu.kind() != kind_) {
    throw std::invalid_argument("GPU optimizer is " + kind_ + " but the CPU optimizer is " + cpu.kind());
  }
  auto st = cpu.state();
  if (st.size() != state_.size()) throw std::invalid_argument("GPU and CPU optimizers keep different state");
  for (size_t i = 0; i < st.size(); ++i) {
    if (st[i].first != state_[i].first || st[i].second.size() != params_.total_size()) {
      throw std::invalid_argument("optimizer state \"" + st[i].first + "\" differs between CPU and GPU");
    }
  }
}

void GpuOptimizer::copy_state_to(Optimizer& cpu) {
  check_kind(cpu);
  auto st = cpu.state();
  for (size_t i = 0; i < st.size(); ++i) {
    KOLO_NN_CUDA(cudaMemcpyAsync(st[i].second.data(), state_[i].second, st[i].second.size_bytes(),
                                 cudaMemcpyDeviceToHost, ctx_.stream()));
  }
  ctx_.synchronize();
  cpu.set_steps(steps_);
  cpu.set_lr(lr_);
}

void GpuOptimizer::copy_state_from(Optimizer& cpu) {
  check_kind(cpu);
  auto st = cpu.state();
  for (size_t i = 0; i < st.size(); ++i) {
    KOLO_NN_CUDA(cudaMemcpyAsync(state_[i].second, st[i].second.data(), st[i].second.size_bytes(),
                                 cudaMemcpyHostToDevice, ctx_.stream()));
  }
  ctx_.synchronize();
  steps_ = cpu.steps();
  lr_ = cpu.lr();
}

}  // namespace kolo::nn::gpu

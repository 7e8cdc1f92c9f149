// kolo::torch::DistributedOptimizer (gradient-accumulator hooks over kolo::GradientSync) and
// broadcast_optimizer_state. See kolo/torch.h.
#include <functional>
#include <typeinfo>
#include <unordered_map>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include "adapters/torch/internal.h"
#include "kolo/status.h"
#include "kolo/torch.h"

namespace kolo::torch {

namespace {

namespace optim = ::torch::optim;

[[noreturn]] void fail(const std::string& message) { throw Error(Status::invalid_argument(message)); }

// The layout of one optimizer's per-parameter state: how to make an empty one, its tensor
// fields (each shaped like the parameter), and its step count if it has one.
struct StateLayout {
  std::function<std::unique_ptr<optim::OptimizerParamState>()> make;
  std::vector<std::pair<std::string, std::function<at::Tensor&(optim::OptimizerParamState&)>>> tensors;
  std::function<int64_t&(optim::OptimizerParamState&)> step;  // empty: no step count
};

template <class S>
StateLayout layout_of(std::vector<std::pair<std::string, at::Tensor& (S::*)() noexcept>> fields,
                      int64_t& (S::*step)() noexcept) {
  StateLayout l;
  l.make = [] { return std::make_unique<S>(); };
  for (auto& [name, field] : fields) {
    l.tensors.emplace_back(name, [f = field](optim::OptimizerParamState& s) -> at::Tensor& {
      return (static_cast<S&>(s).*f)();
    });
  }
  if (step != nullptr) l.step = [step](optim::OptimizerParamState& s) -> int64_t& { return (static_cast<S&>(s).*step)(); };
  return l;
}

StateLayout layout_of(optim::Optimizer& o) {
  using AdamS = optim::AdamParamState;
  using AdamWS = optim::AdamWParamState;
  using RmsS = optim::RMSpropParamState;
  if (dynamic_cast<optim::SGD*>(&o) != nullptr) {
    return layout_of<optim::SGDParamState>({{"momentum_buffer", &optim::SGDParamState::momentum_buffer}}, nullptr);
  }
  if (dynamic_cast<optim::Adam*>(&o) != nullptr) {
    return layout_of<AdamS>(
        {{"exp_avg", &AdamS::exp_avg}, {"exp_avg_sq", &AdamS::exp_avg_sq}, {"max_exp_avg_sq", &AdamS::max_exp_avg_sq}},
        &AdamS::step);
  }
  if (dynamic_cast<optim::AdamW*>(&o) != nullptr) {
    return layout_of<AdamWS>({{"exp_avg", &AdamWS::exp_avg},
                              {"exp_avg_sq", &AdamWS::exp_avg_sq},
                              {"max_exp_avg_sq", &AdamWS::max_exp_avg_sq}},
                             &AdamWS::step);
  }
  if (dynamic_cast<optim::Adagrad*>(&o) != nullptr) {
    return layout_of<optim::AdagradParamState>({{"sum", &optim::AdagradParamState::sum}},
                                               &optim::AdagradParamState::step);
  }
  if (dynamic_cast<optim::RMSprop*>(&o) != nullptr) {
    return layout_of<RmsS>(
        {{"square_avg", &RmsS::square_avg}, {"momentum_buffer", &RmsS::momentum_buffer}, {"grad_avg", &RmsS::grad_avg}},
        &RmsS::step);
  }
  fail(std::string("broadcast_optimizer_state: optimizer type ") + typeid(o).name() +
       " is not supported (SGD, Adam, AdamW, Adagrad, RMSprop are)");
}

std::string state_key(const at::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }

}  // namespace

void broadcast_optimizer_state(optim::Optimizer& optimizer, int root) {
  const StateLayout layout = layout_of(optimizer);
  std::vector<at::Tensor> params;
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) params.push_back(p);
  }
  auto& states = optimizer.state();
  const size_t fields = layout.tensors.size();
  // 1. Which parameters have state on root, and which of its tensors are defined.
  std::vector<int32_t> flags(params.size() * (1 + fields), 0);
  std::vector<int64_t> steps(params.size(), 0);
  for (size_t i = 0; i < params.size(); ++i) {
    auto it = states.find(state_key(params[i]));
    if (it == states.end()) continue;
    flags[i * (1 + fields)] = 1;
    for (size_t f = 0; f < fields; ++f) flags[i * (1 + fields) + 1 + f] = layout.tensors[f].second(*it->second).defined();
    if (layout.step) steps[i] = layout.step(*it->second);
  }
  std::vector<double> lrs;
  for (auto& group : optimizer.param_groups()) lrs.push_back(group.has_options() ? group.options().get_lr() : 0.0);
  std::vector<Handle> handles;
  handles.push_back(kolo::broadcast_async(TensorView::of(flags), root, "bcast.optim.flags"));
  handles.push_back(kolo::broadcast_async(TensorView::of(steps), root, "bcast.optim.steps"));
  handles.push_back(kolo::broadcast_async(TensorView::of(lrs), root, "bcast.optim.lr"));
  wait_all(handles);
  // 2. Make this rank's state look like root's, then copy root's values into it.
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string key = state_key(params[i]);
    const int32_t* f = flags.data() + i * (1 + fields);
    if (f[0] == 0) {
      states.erase(key);
      continue;
    }
    auto& state = states[key];
    if (!state) state = layout.make();
    if (layout.step) layout.step(*state) = steps[i];
    for (size_t k = 0; k < fields; ++k) {
      at::Tensor& t = layout.tensors[k].second(*state);
      if (f[1 + k] == 0) {
        t = at::Tensor();
        continue;
      }
      if (!t.defined() || !t.sizes().equals(params[i].sizes()) || !t.is_contiguous()) {
        t = at::zeros_like(params[i], at::MemoryFormat::Contiguous);
      }
      handles.push_back(broadcast_async(t, root, "bcast.optim." + std::to_string(i) + "." + layout.tensors[k].first));
    }
  }
  wait_all(handles);
  size_t g = 0;
  for (auto& group : optimizer.param_groups()) {
    if (group.has_options()) group.options().set_lr(lrs[g]);
    ++g;
  }
}

// The post-hook of a parameter's gradient accumulator: runs after backward added into .grad.
struct GradReadyHook : ::torch::autograd::FunctionPostHook {
  GradReadyHook(DistributedOptimizer* o, int i) : opt(o), index(i) {}
  ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& outputs,
                                              const ::torch::autograd::variable_list& /*inputs*/) override {
    opt->gradient_ready(index);
    return outputs;
  }
  DistributedOptimizer* opt;
  int index;
};

namespace {

NamedTensors to_named(const ::torch::OrderedDict<std::string, at::Tensor>& d) {
  NamedTensors out;
  for (const auto& item : d) out.emplace_back(item.key(), item.value());
  return out;
}

}  // namespace

DistributedOptimizer::DistributedOptimizer(optim::Optimizer& optimizer,
                                           const ::torch::OrderedDict<std::string, at::Tensor>& named_parameters,
                                           GradientSyncOptions options)
    : DistributedOptimizer(optimizer, to_named(named_parameters), std::move(options)) {}

DistributedOptimizer::DistributedOptimizer(optim::Optimizer& optimizer, const NamedTensors& named_parameters,
                                           GradientSyncOptions options)
    : optimizer_(optimizer), sync_(std::move(options)) {
  std::unordered_map<const void*, std::string> names;
  for (const auto& [name, t] : named_parameters) {
    auto [it, fresh] = names.emplace(t.unsafeGetTensorImpl(), name);
    if (!fresh) fail("DistributedOptimizer: one tensor is named both \"" + it->second + "\" and \"" + name + "\"");
  }
  try {
    size_t g = 0;
    for (auto& group : optimizer.param_groups()) {
      for (size_t i = 0; i < group.params().size(); ++i) {
        const at::Tensor& p = group.params()[i];
        if (!p.requires_grad()) continue;
        std::string name = std::to_string(g) + "." + std::to_string(i);
        if (!named_parameters.empty()) {
          auto it = names.find(p.unsafeGetTensorImpl());
          if (it == names.end()) {
            fail("DistributedOptimizer: parameter " + std::to_string(i) + " of group " + std::to_string(g) + " (shape " +
                 shape_string(p.sizes().vec()) + ") is not in named_parameters");
          }
          name = it->second;
        }
        TensorView v;
        v.dtype = dtype_of(p.scalar_type(), name);
        v.shape = p.sizes().vec();
        v.device = p.is_cuda() ? Device::gpu(p.get_device()) : Device::cpu();
        const int index = sync_.register_gradient(name, v);  // memory: .grad, known in the hook
        params_.push_back(p);
        Hooked h;
        h.accumulator = ::torch::autograd::impl::grad_accumulator(p);
        h.key = h.accumulator->add_post_hook(std::make_unique<GradReadyHook>(this, index));
        hooks_.push_back(std::move(h));
      }
      ++g;
    }
  } catch (...) {
    for (auto& h : hooks_) h.accumulator->del_post_hook(h.key);
    throw;
  }
}

DistributedOptimizer::~DistributedOptimizer() {
  for (auto& h : hooks_) h.accumulator->del_post_hook(h.key);
  sync_.abandon();  // the gradients must outlive their allreduces
}

void DistributedOptimizer::gradient_ready(int index) {
  synchronized_ = false;
  const at::Tensor& grad = params_[static_cast<size_t>(index)].grad();
  sync_.gradient_ready(index, view_of(grad, sync_.name(index) + " (gradient)"));
}

void DistributedOptimizer::synchronize() {
  for (size_t i = 0; i < params_.size(); ++i) {
    const int index = static_cast<int>(i);
    if (sync_.submitted(index)) continue;
    // Not reported by backward (unused this step): every rank must still reduce it.
    at::Tensor& p = params_[i];
    if (!p.grad().defined()) {
      at::NoGradGuard no_grad;
      p.mutable_grad() = at::zeros_like(p, at::MemoryFormat::Contiguous);
    }
    sync_.set_view(index, view_of(p.grad(), sync_.name(index) + " (gradient)"));
  }
  sync_.synchronize();
  synchronized_ = true;
}

void DistributedOptimizer::step() {
  if (!skip_ && !synchronized_) synchronize();
  synchronized_ = false;
  optimizer_.step();
}

void DistributedOptimizer::zero_grad() { optimizer_.zero_grad(); }

}  // namespace kolo::torch

// DistributedOptimizer: per-layer allreduce submission, accumulation, fp16 staging, and
// the start-of-training broadcasts.
#include "optimizer/distributed_optimizer.h"

#include <atomic>
#include <cstdint>
#include <string>

#include "core/logging.h"
#include "kolo/collectives.h"
#include "kolo/memory.h"
#include "kolo/runtime.h"

namespace kolo {

DistributedOptimizer::DistributedOptimizer(std::unique_ptr<Optimizer> inner,
                                           const DistributedOptions& options)
    : inner_(std::move(inner)),
      options_(options),
      params_(inner_->params()),
      window_(params_.count(), options_.backward_passes_per_step) {
  if (options_.fp16_compression) half_.resize(params_.total_size());
  place_gradients();
}

// All or nothing across ranks (kolo/memory.h, allocate_shared_everywhere): a rank with shared
// gradients against one with private ones would make every allreduce a mismatch.
void DistributedOptimizer::place_gradients() {
  static std::atomic<uint64_t> constructions{0};
  const size_t count = params_.total_size();
  // fp16 compression reduces the private half copies, so shared memory would not help.
  if (!options_.shared_gradients || options_.fp16_compression || count == 0 || !is_initialized()) return;
  std::string why;
  auto* shared = static_cast<float*>(allocate_shared_everywhere(
      count * sizeof(float), "kolo.distributed_optimizer.shared_gradients." + std::to_string(constructions++), &why));
  if (shared == nullptr) {
    KOLO_LOG(LogLevel::kInfo, "DistributedOptimizer: gradients stay private (" << count * sizeof(float)
                                                                             << " bytes): " << why);
    return;
  }
  params_.place_grads(shared);
  gradients_shared_ = true;
}

DistributedOptimizer::~DistributedOptimizer() = default;  // window_ waits (see the header)

nn::GradReadyFn DistributedOptimizer::hook() {
  return [this](const std::vector<int>& indices) {
    for (int i : indices) {
      // Submit during the last pass of the accumulation window only.
      if (window_.report(i)) submit(i);
    }
  };
}

void DistributedOptimizer::submit(int index) {
  const auto& info = params_.info(index);
  float* g = params_.grad(index);
  const std::string name = "grad." + info.name;
  Shape shape{static_cast<int64_t>(info.size)};
  // 1/k is the same on every rank and travels as the collective's prescale. The rank's
  // weight differs per rank, and kolo requires scale factors to agree across ranks, so it
  // is applied here, before submission.
  const double prescale = 1.0 / options_.backward_passes_per_step;
  if (options_.local_weight != 1.0) {
    const auto w = static_cast<float>(options_.local_weight);
    for (size_t j = 0; j < info.size; ++j) g[j] *= w;
  }
  if (options_.fp16_compression) {
    // Scale before compressing: the sum of k passes could overflow half's range.
    Half* h = half_.data() + info.offset;
    for (size_t j = 0; j < info.size; ++j) h[j] = float_to_half(static_cast<float>(g[j] * prescale));
    window_.set_handle(index, allreduce_async(TensorView::of(h, shape), name, AllreduceOptions{ReduceOp::kAverage}));
  } else {
    window_.set_handle(index, allreduce_async(TensorView::of(g, shape), name,
                                              AllreduceOptions{ReduceOp::kAverage, prescale, 1.0}));
  }
}

bool DistributedOptimizer::step() {
  const bool updated = window_.end_pass([this](int i) { submit(i); },
                                        [this](int i) {
                                          if (!options_.fp16_compression) return;
                                          const auto& info = params_.info(i);
                                          float* g = params_.grad(i);
                                          const Half* hp = half_.data() + info.offset;
                                          for (size_t j = 0; j < info.size; ++j) g[j] = half_to_float(hp[j]);
                                        });
  if (updated) inner_->step();
  return updated;
}

void broadcast_parameters(nn::ParamStore& params, int root, const std::string& name) {
  if (params.total_size() == 0) return;
  auto v = params.values();
  broadcast(TensorView::of(v.data(), Shape{static_cast<int64_t>(v.size())}), root, name);
}

void broadcast_model(nn::Model& model, int root) {
  broadcast_parameters(model.params(), root, "bcast." + model.arch() + ".params");
  broadcast_parameters(model.buffers(), root, "bcast." + model.arch() + ".buffers");
}

void broadcast_optimizer_state(Optimizer& opt, int root) {
  for (auto& [name, buf] : opt.state()) {
    broadcast(TensorView::of(buf.data(), Shape{static_cast<int64_t>(buf.size())}), root,
              "bcast.optimizer." + name);
  }
  // The step count (Adam's bias correction) and the current rate travel together.
  double scalars[2] = {static_cast<double>(opt.steps()), opt.lr()};
  broadcast(TensorView::of(scalars, Shape{2}), root, "bcast.optimizer.scalars");
  opt.set_steps(static_cast<int64_t>(scalars[0]));
  opt.set_lr(scalars[1]);
}

}  // namespace kolo

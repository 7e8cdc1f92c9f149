// DistributedOptimizer: per-layer allreduce submission, accumulation, fp16 staging, and
// the start-of-training broadcasts.
#include "optimizer/distributed_optimizer.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "core/logging.h"
#include "kolo/collectives.h"
#include "kolo/memory.h"
#include "kolo/runtime.h"

namespace kolo {

GradientSyncOptions gradient_sync_options(const DistributedOptions& o,
                                          std::function<void(int, const TensorView&)> before_submit) {
  if (o.backward_passes_per_step < 1) {
    throw std::invalid_argument("backward_passes_per_step must be >= 1, got " +
                                std::to_string(o.backward_passes_per_step));
  }
  GradientSyncOptions s;
  s.op = ReduceOp::kAverage;
  s.compression = o.fp16_compression ? Compression::kFp16 : Compression::kNone;
  s.backward_passes_per_step = o.backward_passes_per_step;
  s.average_over_passes = true;  // an update uses the mean gradient of the k passes
  s.name_prefix = "grad.";
  s.before_submit = std::move(before_submit);
  return s;
}

DistributedOptimizer::DistributedOptimizer(std::unique_ptr<Optimizer> inner,
                                           const DistributedOptions& options)
    : inner_(std::move(inner)), options_(options), params_(inner_->params()),
      sync_(gradient_sync_options(options, [this](int i, const TensorView& v) { apply_local_weight(i, v); })) {
  place_gradients();  // before the views are taken: it moves the gradient buffer
  for (size_t i = 0; i < params_.count(); ++i) {
    const auto& info = params_.info(static_cast<int>(i));
    sync_.register_gradient(info.name, TensorView::of(params_.grad(static_cast<int>(i)),
                                                      Shape{static_cast<int64_t>(info.size)}));
  }
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

DistributedOptimizer::~DistributedOptimizer() = default;  // sync_ waits (see the header)

// The rank's weight differs per rank, and kolo requires scale factors to agree across
// ranks, so it multiplies the gradient here, right before submission, not as a prescale.
void DistributedOptimizer::apply_local_weight(int, const TensorView& v) {
  if (options_.local_weight == 1.0) return;
  const auto w = static_cast<float>(options_.local_weight);
  auto* g = static_cast<float*>(v.data);
  for (int64_t j = 0; j < v.num_elements(); ++j) g[j] *= w;
}

nn::GradReadyFn DistributedOptimizer::hook() {
  return [this](const std::vector<int>& indices) {
    for (int i : indices) sync_.gradient_ready(i);
  };
}

bool DistributedOptimizer::step() {
  if (++passes_ < options_.backward_passes_per_step) return false;
  passes_ = 0;
  sync_.synchronize();
  inner_->step();
  return true;
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

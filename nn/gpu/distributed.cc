// GpuDistributedOptimizer: events, device-tensor allreduce submission, waiting, update.
#include "nn/gpu/distributed.h"

#include <functional>
#include <stdexcept>
#include <string>

#include "kolo/collectives.h"
#include "nn/gpu/kernels.h"

namespace kolo::nn::gpu {

namespace {

GradientSyncOptions sync_options(const DistributedOptions& o, std::function<void(int, const TensorView&)> before) {
  if (o.fp16_compression) throw std::invalid_argument("fp16 gradient compression is not supported on GPU yet");
  return gradient_sync_options(o, std::move(before));
}

}  // namespace

GpuDistributedOptimizer::GpuDistributedOptimizer(std::unique_ptr<GpuOptimizer> inner, const DistributedOptions& options)
    : inner_(std::move(inner)),
      options_(options),
      params_(inner_->params()),
      sync_(sync_options(options_, [this](int i, const TensorView& v) { before_submit(i, v); })) {
  const int count = static_cast<int>(params_.host().count());
  events_.assign(static_cast<size_t>(count), nullptr);
  for (auto& e : events_) KOLO_NN_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  for (int i = 0; i < count; ++i) {
    const auto& info = params_.host().info(i);
    TensorView v = TensorView::of(params_.grad(i), Shape{static_cast<int64_t>(info.size)});
    v.device = Device::gpu(inner_->context().device());
    v.ready_event = events_[static_cast<size_t>(i)];
    sync_.register_gradient(info.name, v);
  }
}

GpuDistributedOptimizer::~GpuDistributedOptimizer() {
  sync_.abandon();  // gradient memory and events must outlive their allreduces
  for (auto e : events_) {
    if (e) cudaEventDestroy(e);
  }
}

GradReadyFn GpuDistributedOptimizer::hook() {
  return [this](const std::vector<int>& indices) {
    for (int i : indices) sync_.gradient_ready(i);
  };
}

// Runs right before kolo takes gradient `index`: the per-rank weight (on the device), then
// the event kolo's GPU executor waits on.
void GpuDistributedOptimizer::before_submit(int index, const TensorView& view) {
  cudaStream_t stream = inner_->context().stream();
  if (options_.local_weight != 1.0) {
    scale_inplace(static_cast<float*>(view.data), view.num_elements(), static_cast<float>(options_.local_weight),
                  stream);
  }
  KOLO_NN_CUDA(cudaEventRecord(events_[static_cast<size_t>(index)], stream));
}

bool GpuDistributedOptimizer::step() {
  if (++passes_ < options_.backward_passes_per_step) return false;
  passes_ = 0;
  sync_.synchronize();
  inner_->step();
  return true;
}

void broadcast_gpu_model(DeviceParams& params, DeviceParams& buffers, GpuContext& ctx, const std::string& arch,
                         int root) {
  ctx.synchronize();  // the values must be written before another stream reads them
  for (auto* store : {&params, &buffers}) {
    if (store->total_size() == 0) continue;
    TensorView v = TensorView::of(store->values(), Shape{static_cast<int64_t>(store->total_size())});
    v.device = Device::gpu(ctx.device());
    broadcast(v, root, "bcast.gpu." + arch + (store == &params ? ".params" : ".buffers"));
  }
}

}  // namespace kolo::nn::gpu

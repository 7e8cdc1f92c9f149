// GpuDistributedOptimizer: events, device-tensor allreduce submission, waiting, update.
#include "nn/gpu/distributed.h"

#include <stdexcept>
#include <string>

#include "kolo/collectives.h"
#include "nn/gpu/kernels.h"

namespace kolo::nn::gpu {

GpuDistributedOptimizer::GpuDistributedOptimizer(std::unique_ptr<GpuOptimizer> inner, const DistributedOptions& options)
    : inner_(std::move(inner)),
      options_(options),
      params_(inner_->params()),
      window_(params_.host().count(), options_.backward_passes_per_step) {
  if (options_.fp16_compression) throw std::invalid_argument("fp16 gradient compression is not supported on GPU yet");
  events_.assign(params_.host().count(), nullptr);
  for (auto& e : events_) KOLO_NN_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

GpuDistributedOptimizer::~GpuDistributedOptimizer() {
  window_.wait_quietly();  // gradient memory and events must outlive their allreduces
  for (auto e : events_) {
    if (e) cudaEventDestroy(e);
  }
}

GradReadyFn GpuDistributedOptimizer::hook() {
  return [this](const std::vector<int>& indices) {
    for (int i : indices) {
      if (window_.report(i)) submit(i);
    }
  };
}

void GpuDistributedOptimizer::submit(int index) {
  const auto& info = params_.host().info(index);
  float* g = params_.grad(index);
  cudaStream_t stream = inner_->context().stream();
  if (options_.local_weight != 1.0) {
    scale_inplace(g, static_cast<int64_t>(info.size), static_cast<float>(options_.local_weight), stream);
  }
  cudaEvent_t ev = events_[static_cast<size_t>(index)];
  KOLO_NN_CUDA(cudaEventRecord(ev, stream));
  TensorView v = TensorView::of(g, Shape{static_cast<int64_t>(info.size)});
  v.device = Device::gpu(inner_->context().device());
  v.ready_event = ev;
  const double prescale = 1.0 / options_.backward_passes_per_step;
  window_.set_handle(index, allreduce_async(v, "grad." + info.name, AllreduceOptions{ReduceOp::kAverage, prescale, 1.0}));
}

bool GpuDistributedOptimizer::step() {
  const bool updated = window_.end_pass([this](int i) { submit(i); }, [](int) {});
  if (updated) inner_->step();
  return updated;
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

// GpuDistributedOptimizer: events, device-tensor allreduce submission, waiting, update.
#include "nn/gpu/distributed.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "kolo/collectives.h"
#include "nn/gpu/kernels.h"

namespace kolo::nn::gpu {

GpuDistributedOptimizer::GpuDistributedOptimizer(std::unique_ptr<GpuOptimizer> inner, const DistributedOptions& options)
    : inner_(std::move(inner)), options_(options), params_(inner_->params()) {
  if (options_.backward_passes_per_step < 1) {
    throw std::invalid_argument("backward_passes_per_step must be >= 1, got " +
                                std::to_string(options_.backward_passes_per_step));
  }
  if (options_.fp16_compression) throw std::invalid_argument("fp16 gradient compression is not supported on GPU yet");
  const size_t n = params_.host().count();
  ready_count_.assign(n, 0);
  handles_.resize(n);
  events_.assign(n, nullptr);
  for (auto& e : events_) KOLO_NN_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

GpuDistributedOptimizer::~GpuDistributedOptimizer() {
  for (auto& h : handles_) {
    if (h.valid()) (void)h.status();  // gradient memory must outlive its allreduce
  }
  for (auto e : events_) {
    if (e) cudaEventDestroy(e);
  }
}

GradReadyFn GpuDistributedOptimizer::hook() {
  return [this](const std::vector<int>& indices) {
    for (int i : indices) {
      if (++ready_count_[static_cast<size_t>(i)] == options_.backward_passes_per_step) submit(i);
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
  handles_[static_cast<size_t>(index)] =
      allreduce_async(v, "grad." + info.name, AllreduceOptions{ReduceOp::kAverage, prescale, 1.0});
}

void GpuDistributedOptimizer::wait_all() {
  for (auto& h : handles_) {
    if (!h.valid()) continue;
    Handle mine = std::move(h);
    h = Handle();
    synchronize(mine);  // throws kolo::Error naming the tensor
  }
}

bool GpuDistributedOptimizer::step() {
  ++passes_;
  if (passes_ < options_.backward_passes_per_step) return false;
  const auto wait_start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < ready_count_.size(); ++i) {
    if (ready_count_[i] < options_.backward_passes_per_step) submit(static_cast<int>(i));
  }
  wait_all();
  last_wait_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  inner_->step();
  passes_ = 0;
  std::fill(ready_count_.begin(), ready_count_.end(), 0);
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

// kolo::torch collectives: torch tensors as kolo views, the blocking forms with contiguous
// staging, and broadcast_parameters. See kolo/torch.h.
#include <cstring>
#include <optional>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#ifdef KOLO_TORCH_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "adapters/torch/internal.h"
#include "kolo/status.h"
#include "kolo/torch.h"

namespace kolo::torch {

namespace {

[[noreturn]] void fail(const std::string& message) { throw Error(Status::invalid_argument(message)); }

// An event recorded on the legacy default stream (where LibTorch queues its work unless a
// stream guard says otherwise) for kolo's GPU path to wait on. One per thread and device,
// re-recorded for each tensor: a wait on a later record of it is still after the tensor's
// producer. nullptr without CUDA.
void* cuda_ready_event([[maybe_unused]] const at::Tensor& t) {
#ifdef KOLO_TORCH_WITH_CUDA
  thread_local std::vector<cudaEvent_t> events;
  const auto device = static_cast<size_t>(t.get_device());
  if (events.size() <= device) events.resize(device + 1, nullptr);
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(static_cast<int>(device));
  if (events[device] == nullptr && cudaEventCreateWithFlags(&events[device], cudaEventDisableTiming) != cudaSuccess) {
    cudaSetDevice(previous);
    throw Error(Status::internal("cudaEventCreate failed for a CUDA tensor on device " + std::to_string(device)));
  }
  const cudaError_t rc = cudaEventRecord(events[device], nullptr);
  cudaSetDevice(previous);
  if (rc != cudaSuccess) throw Error(Status::internal(std::string("cudaEventRecord: ") + cudaGetErrorString(rc)));
  return events[device];
#else
  return nullptr;
#endif
}

// Runs `op` on a contiguous tensor with t's values and copies the result back into t when
// a staging copy was needed.
template <class Op>
void in_place(const at::Tensor& t, Op&& op) {
  if (t.is_contiguous()) {
    op(t);
    return;
  }
  at::Tensor staged = t.contiguous();
  op(staged);
  at::NoGradGuard no_grad;
  at::Tensor(t).copy_(staged);
}

}  // namespace

DType dtype_of(c10::ScalarType type, const std::string& what) {
  switch (type) {
    case c10::ScalarType::Byte: return DType::kUInt8;
    case c10::ScalarType::Int: return DType::kInt32;
    case c10::ScalarType::Long: return DType::kInt64;
    case c10::ScalarType::Half: return DType::kFloat16;
    case c10::ScalarType::BFloat16: return DType::kBFloat16;
    case c10::ScalarType::Float: return DType::kFloat32;
    case c10::ScalarType::Double: return DType::kFloat64;
    case c10::ScalarType::Char: return DType::kInt8;
    case c10::ScalarType::Short: return DType::kInt16;
    case c10::ScalarType::Bool: return DType::kBool;
    default:
      fail("tensor \"" + what + "\": dtype " + std::string(c10::toString(type)) +
           " is not supported by kolo (bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)");
  }
}

TensorView view_of(const at::Tensor& t, const std::string& what) {
  if (!t.defined()) fail("tensor \"" + what + "\" is undefined");
  if (!t.is_contiguous()) fail("tensor \"" + what + "\" is not contiguous (" + shape_string(t.sizes().vec()) + ")");
  TensorView v;
  v.dtype = dtype_of(t.scalar_type(), what);
  v.shape = t.sizes().vec();
  v.data = t.data_ptr();
  if (t.is_cuda()) {
    v.device = Device::gpu(t.get_device());
    v.ready_event = cuda_ready_event(t);
  } else if (!t.is_cpu()) {
    fail("tensor \"" + what + "\" is on " + t.device().str() + "; kolo takes CPU and CUDA tensors");
  }
  return v;
}

Handle allreduce_async(const at::Tensor& t, const std::string& name, const AllreduceOptions& options) {
  return kolo::allreduce_async(view_of(t, name), name, options);
}

void allreduce(const at::Tensor& t, const std::string& name, const AllreduceOptions& options) {
  in_place(t, [&](const at::Tensor& c) { kolo::allreduce(view_of(c, name), name, options); });
}

Handle broadcast_async(const at::Tensor& t, int root, const std::string& name) {
  return kolo::broadcast_async(view_of(t, name), root, name);
}

void broadcast(const at::Tensor& t, int root, const std::string& name) {
  in_place(t, [&](const at::Tensor& c) { kolo::broadcast(view_of(c, name), root, name); });
}

at::Tensor allgather(const at::Tensor& t, const std::string& name) {
  // kolo gathers into host memory; a CUDA tensor travels through a host copy.
  const at::Tensor host = t.is_cuda() ? t.cpu() : t.contiguous();
  const Tensor gathered = kolo::allgather(view_of(host, name), name);
  at::Tensor out = at::empty(gathered.shape, host.options());
  std::memcpy(out.data_ptr(), gathered.bytes.data(), gathered.bytes.size());
  return t.is_cuda() ? out.to(t.device()) : out;
}

void wait_all(std::vector<Handle>& handles) {
  std::optional<Error> first;
  for (auto& h : handles) {
    const Status& s = h.status();
    if (!s.is_ok() && !first) first = Error(s);
  }
  handles.clear();
  if (first) throw *first;
}

void broadcast_parameters(const NamedTensors& tensors, int root, const std::string& prefix) {
  // Every broadcast in flight at once (kolo fuses them); staging copies for the others.
  std::vector<std::pair<at::Tensor, at::Tensor>> staged;  // (target, contiguous copy)
  std::vector<Handle> handles;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) continue;
    at::Tensor c = t.is_contiguous() ? t : t.contiguous();
    if (!t.is_contiguous()) staged.emplace_back(t, c);
    handles.push_back(broadcast_async(c, root, prefix + name));
  }
  wait_all(handles);
  at::NoGradGuard no_grad;
  for (auto& [target, copy] : staged) at::Tensor(target).copy_(copy);
}

void broadcast_parameters(const ::torch::nn::Module& module, int root) {
  NamedTensors params;
  NamedTensors buffers;
  for (const auto& item : module.named_parameters(true)) params.emplace_back(item.key(), item.value());
  for (const auto& item : module.named_buffers(true)) buffers.emplace_back(item.key(), item.value());
  broadcast_parameters(params, root, "bcast.param.");
  broadcast_parameters(buffers, root, "bcast.buffer.");
}

}  // namespace kolo::torch

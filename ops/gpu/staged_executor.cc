#include "ops/gpu/staged_executor.h"

#include <algorithm>

#include "ops/gpu/cuda_check.h"

namespace kolo::ops::gpu {
namespace {

// Layout of the staging buffer: entries back to back (whole elements, as on CPU).
size_t stage_layout(const std::vector<TensorEntry>& entries, std::vector<size_t>* offsets) {
  size_t total = 0;
  offsets->resize(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    (*offsets)[i] = total;
    total += entries[i].view.num_bytes();
  }
  return total;
}

}  // namespace

StagedExecutor::~StagedExecutor() {
  for (cudaStream_t s : streams_)
    if (s) cudaStreamDestroy(s);
}

Status StagedExecutor::stream_for(int device, cudaStream_t* out) {
  if (device < 0) return Status::invalid_argument("GPU tensor with a negative device ordinal");
  if (static_cast<size_t>(device) >= streams_.size()) streams_.resize(static_cast<size_t>(device) + 1, nullptr);
  KOLO_CUDA_RETURN(cudaSetDevice(device));
  cudaStream_t& s = streams_[static_cast<size_t>(device)];
  if (!s) KOLO_CUDA_RETURN(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  *out = s;
  return Status::ok();
}

Status StagedExecutor::copy(std::vector<TensorEntry>& entries, const std::vector<size_t>& offsets, Direction dir) {
  auto* host = static_cast<std::byte*>(staging_.data());
  std::vector<int> used;
  for (size_t i = 0; i < entries.size(); ++i) {
    TensorView& v = entries[i].view;
    cudaStream_t s = nullptr;
    KOLO_RETURN_IF_ERROR(stream_for(v.device.id, &s));
    // Also before writing: a broadcast's non-root ranks only copy in, and must not race the
    // producer's pending writes to the same memory.
    if (v.ready_event) KOLO_CUDA_RETURN(cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(v.ready_event), 0));
    if (dir == Direction::kToHost) {
      KOLO_CUDA_RETURN(cudaMemcpyAsync(host + offsets[i], v.data, v.num_bytes(), cudaMemcpyDeviceToHost, s));
    } else {
      KOLO_CUDA_RETURN(cudaMemcpyAsync(v.data, host + offsets[i], v.num_bytes(), cudaMemcpyHostToDevice, s));
    }
    if (std::find(used.begin(), used.end(), v.device.id) == used.end()) used.push_back(v.device.id);
  }
  for (int d : used) KOLO_CUDA_RETURN(cudaStreamSynchronize(streams_[static_cast<size_t>(d)]));
  return Status::ok();
}

Status StagedExecutor::execute(const Response& r, std::vector<TensorEntry>& entries) {
  switch (r.type) {
    case Response::Type::kAllreduce: return allreduce(r, entries);
    case Response::Type::kBroadcast:
    case Response::Type::kAllgather: return via_mpi(r, entries);
    case Response::Type::kAlltoall:
    case Response::Type::kReducescatter:
      // Decided alike on every rank before any data moves: every rank fails the same way.
      return Status::invalid_argument("\"" + r.names.at(0) + "\": alltoall and reducescatter of GPU tensors need "
                                      "the NCCL executor (this build or job stages GPU tensors through MPI)");
    case Response::Type::kError: break;
  }
  return Status::internal("staged GPU executor given an error response");
}

Status StagedExecutor::allreduce(const Response& r, std::vector<TensorEntry>& entries) {
  std::vector<size_t> offsets;
  const size_t total = stage_layout(entries, &offsets);
  KOLO_RETURN_IF_ERROR(staging_.reserve(total));
  KOLO_RETURN_IF_ERROR(copy(entries, offsets, Direction::kToHost));
  KOLO_RETURN_IF_ERROR(mpi_->allreduce_buffer(staging_.data(), total / dtype_size(r.dtype), r.dtype, r.reduce_op,
                                              r.prescale, r.postscale));
  return copy(entries, offsets, Direction::kToDevice);
}

// Broadcast and allgather: the MPI executor runs them on host entries that point into
// staging (same requests and handles, so allgather fills the user's handle directly).
Status StagedExecutor::via_mpi(const Response& r, std::vector<TensorEntry>& entries) {
  std::vector<size_t> offsets;
  const size_t total = stage_layout(entries, &offsets);
  KOLO_RETURN_IF_ERROR(staging_.reserve(total));
  const bool broadcast = r.type == Response::Type::kBroadcast;
  // A broadcast needs the device data only on the root; an allgather on every rank.
  if (!broadcast || rank_ == r.root) KOLO_RETURN_IF_ERROR(copy(entries, offsets, Direction::kToHost));
  std::vector<TensorEntry> host = entries;
  auto* base = static_cast<std::byte*>(staging_.data());
  for (size_t i = 0; i < host.size(); ++i) {
    host[i].view.data = base + offsets[i];
    host[i].view.device = Device::cpu();
    host[i].view.ready_event = nullptr;
  }
  Response cpu = r;
  cpu.device = Device::cpu();
  KOLO_RETURN_IF_ERROR(mpi_->execute(cpu, host));
  if (broadcast && rank_ != r.root) return copy(entries, offsets, Direction::kToDevice);
  return Status::ok();
}

}  // namespace kolo::ops::gpu

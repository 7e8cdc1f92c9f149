#include "ops/gpu/nccl_executor.h"

#include <algorithm>
#include <cstring>

#include "ops/gpu/event_wait.h"
#include "ops/gpu/nccl_types.h"
#include "ops/mpi_util.h"

namespace kolo::ops::gpu {
namespace {

// Fusion-buffer slots start at multiples of this, so the batched copy moves 16-byte words
// (every dtype's size divides it, so slots stay whole elements).
constexpr size_t kSlotAlign = 16;

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Ok, or why NCCL cannot reduce `t` (`what` names the tensor, or is empty).
Status check_reducible(DType t, const std::string& what) {
  if (nccl_reduces(t)) return Status::ok();
  return Status::invalid_argument(what + "NCCL cannot reduce " + std::string(dtype_name(t)) +
                                  " GPU tensors (it has no such type); use int32, or reduce a CPU tensor");
}

}  // namespace

NcclExecutor::NcclExecutor(MPI_Comm data_comm) : mpi_comm_(data_comm) {
  MPI_Comm_rank(mpi_comm_, &rank_);
  MPI_Comm_size(mpi_comm_, &size_);
}

NcclExecutor::~NcclExecutor() {
  // Buffers free themselves; the communicators first, while their stream still exists.
  hier_.reset();
  if (comm_) ncclCommDestroy(comm_);
  if (done_) cudaEventDestroy(done_);
  if (stream_) cudaStreamDestroy(stream_);
}

Status NcclExecutor::fail(Status s) {
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
  // The host-local one too: a kernel stuck on it would block every later device sync.
  if (hier_) hier_->abort();
  broken_ = Status::communication("the NCCL communicator is unusable after an earlier failure: " + s.message());
  return s;
}

Status NcclExecutor::setup_local(int device, ncclUniqueId* id) {
  KOLO_CUDA_RETURN(cudaSetDevice(device));
  if (!stream_) KOLO_CUDA_RETURN(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  if (!done_) KOLO_CUDA_RETURN(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  if (rank_ == 0) KOLO_NCCL_RETURN(ncclGetUniqueId(id));
  return Status::ok();
}

void NcclExecutor::enable_hierarchical(MPI_Comm local_comm, MPI_Comm cross_comm) {
  hier_ = std::make_unique<HierarchicalAllreduce>(mpi_comm_, local_comm, cross_comm);
}

Status NcclExecutor::ensure_stream(int device) {
  if (device_ >= 0 && device != device_) {
    return Status::invalid_argument("GPU tensor on gpu:" + std::to_string(device) + ", but this rank's GPU collectives use gpu:" +
                                    std::to_string(device_) + "; keep a rank's GPU tensors on one device");
  }
  KOLO_CUDA_RETURN(cudaSetDevice(device));
  if (!stream_) KOLO_CUDA_RETURN(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  if (!done_) KOLO_CUDA_RETURN(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  device_ = device;
  return Status::ok();
}

// Every rank reaches this at the same response (hierarchical mode: the first allreduce).
// A local stream failure is still agreed inside HierarchicalAllreduce::ensure_comm's steps.
Status NcclExecutor::ensure_hierarchical(int device) {
  if (!broken_.is_ok()) return broken_;
  if (hier_->comm()) return ensure_stream(device);
  Status s = ensure_stream(device);
  if (s.code() == Status::Code::kInvalidArgument) return s;
  s = hier_->ensure_comm(device);
  if (!s.is_ok()) return fail(s);
  return Status::ok();
}

Status NcclExecutor::ensure_comm(int device) {
  if (comm_) {
    // Cheap, and keeps callers on other threads (benchmarks, tests) on the right device.
    if (device == device_) return KOLO_CUDA_STATUS(cudaSetDevice(device_));
    return Status::invalid_argument("GPU tensor on gpu:" + std::to_string(device) +
                                    ", but this rank's NCCL communicator uses gpu:" + std::to_string(device_) +
                                    " (the device of its first GPU collective); keep a rank's GPU tensors on one device");
  }
  if (!broken_.is_ok()) return broken_;
  // Every rank gets here at the same response; the MPI calls below match across ranks, and
  // the agreement steps turn one rank's failure into an error everywhere instead of a hang.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  Status local = setup_local(device, &id);
  int ok = local.is_ok() ? 1 : 0, all_ok = 0;
  KOLO_RETURN_IF_ERROR(mpi_status(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, mpi_comm_), "MPI_Allreduce"));
  if (!all_ok) return fail(local.is_ok() ? Status::communication("NCCL setup failed on another rank") : local);
  KOLO_RETURN_IF_ERROR(mpi_status(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, mpi_comm_), "MPI_Bcast(ncclUniqueId)"));
  ncclComm_t comm = nullptr;
  local = KOLO_NCCL_STATUS(ncclCommInitRank(&comm, size_, id, rank_));
  if (local.is_ok()) comm_ = comm;  // on failure NCCL promises nothing about `comm`
  ok = local.is_ok() ? 1 : 0;
  KOLO_RETURN_IF_ERROR(mpi_status(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, mpi_comm_), "MPI_Allreduce"));
  if (!all_ok) return fail(local.is_ok() ? Status::communication("ncclCommInitRank failed on another rank") : local);
  device_ = device;
  return Status::ok();
}

Status NcclExecutor::finish() {
  KOLO_CUDA_RETURN(cudaEventRecord(done_, stream_));
  // Polled with a bound (ops/gpu/event_wait.h): a vanished peer or a network failure ends
  // the wait with an error instead of blocking the coordinator forever.
  Status s = wait_event_bounded(done_, {comm_, hier_ ? hier_->comm() : nullptr}, kGpuPeerTimeout, "an NCCL collective");
  return s.is_ok() ? s : fail(s);
}

Status NcclExecutor::prepare(const Response& r, const std::vector<TensorEntry>& entries) {
  if (entries.empty()) return Status::internal("NCCL executor given no tensors for \"" + r.names.at(0) + "\"");
  if (r.type == Response::Type::kAllreduce || r.type == Response::Type::kReducescatter)
    KOLO_RETURN_IF_ERROR(check_reducible(r.dtype, "\"" + r.names.at(0) + "\": "));
  const bool hier_only = hier_ && r.type == Response::Type::kAllreduce;
  for (const TensorEntry& e : entries) {
    Status s = hier_only ? ensure_hierarchical(e.view.device.id) : ensure_comm(e.view.device.id);
    if (s.code() == Status::Code::kInvalidArgument)
      return Status::invalid_argument("\"" + e.request.name + "\": " + s.message());
    KOLO_RETURN_IF_ERROR(s);
  }
  for (const TensorEntry& e : entries)
    if (e.view.ready_event)
      KOLO_CUDA_RETURN(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(e.view.ready_event), 0));
  return Status::ok();
}

Status NcclExecutor::execute(const Response& r, std::vector<TensorEntry>& entries) {
  KOLO_RETURN_IF_ERROR(prepare(r, entries));
  Status s;
  switch (r.type) {
    case Response::Type::kAllreduce: s = allreduce(r, entries); break;
    case Response::Type::kBroadcast: s = broadcast(r, entries); break;
    case Response::Type::kAllgather: s = allgather(r, entries); break;
    case Response::Type::kAlltoall: s = alltoall(r, entries); break;
    case Response::Type::kReducescatter: s = reducescatter(r, entries); break;
    case Response::Type::kError: return Status::internal("NCCL executor given an error response");
  }
  if (s.is_ok()) s = finish();
  // A CUDA/NCCL failure or a timeout midway (e.g. the hierarchical allreduce's wait for its
  // reduce-scatter) may leave work of this collective stuck on the stream and peers inside
  // it: abort, as finish() does. Invalid arguments are found alike on every rank before any
  // work is enqueued, and leave the communicator usable.
  if (s.is_ok() || s.code() == Status::Code::kInvalidArgument) return s;
  return fail(s);
}

Status NcclExecutor::reduce_on_stream(void* buf, size_t count, DType t, ReduceOp op, double prescale,
                                      double postscale) {
  KOLO_CUDA_RETURN(launch_scale(buf, count, t, prescale, stream_));
  if (hier_) {
    KOLO_RETURN_IF_ERROR(hier_->allreduce(buf, count, t, op, stream_));
  } else {
    KOLO_NCCL_RETURN(ncclAllReduce(buf, buf, count, nccl_dtype(t), nccl_op(t, op), comm_, stream_));
  }
  KOLO_CUDA_RETURN(launch_postscale(buf, count, t, op, size_, postscale, stream_));
  return Status::ok();
}

Status NcclExecutor::allreduce(const Response& r, std::vector<TensorEntry>& entries) {
  if (entries.size() > 1) return allreduce_fused(r, entries);
  TensorView& v = entries[0].view;
  return reduce_on_stream(v.data, static_cast<size_t>(v.num_elements()), r.dtype, r.reduce_op, r.prescale,
                          r.postscale);
}

Status NcclExecutor::upload_descs(const std::vector<CopyDesc>& descs) {
  const size_t bytes = descs.size() * sizeof(CopyDesc);
  // Pinned, so the upload is truly asynchronous. The host copy is rewritten only by the
  // next collective, after finish(): an upload still in flight is never overwritten.
  KOLO_RETURN_IF_ERROR(descs_host_.reserve(bytes));
  KOLO_RETURN_IF_ERROR(descs_dev_.reserve(bytes));
  std::memcpy(descs_host_.data(), descs.data(), bytes);
  KOLO_CUDA_RETURN(cudaMemcpyAsync(descs_dev_.data(), descs_host_.data(), bytes, cudaMemcpyHostToDevice, stream_));
  return Status::ok();
}

Status NcclExecutor::allreduce_fused(const Response& r, std::vector<TensorEntry>& entries) {
  const size_t n = entries.size();
  std::vector<size_t> offsets(n);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    offsets[i] = total;
    total = align_up(total + entries[i].view.num_bytes(), kSlotAlign);
  }
  KOLO_RETURN_IF_ERROR(fusion_.reserve(total));
  auto* fusion = static_cast<std::byte*>(fusion_.data());
  // descs[0, n) pack user tensors into their slots, descs[n, 2n) unpack them: one upload,
  // two launches.
  std::vector<CopyDesc> pack(n), unpack(n);
  for (size_t i = 0; i < n; ++i) {
    TensorView& v = entries[i].view;
    pack[i] = CopyDesc{v.data, fusion + offsets[i], v.num_bytes(), 0};
    unpack[i] = CopyDesc{fusion + offsets[i], v.data, v.num_bytes(), 0};
  }
  const uint64_t chunks = plan_batched_copy(pack);
  plan_batched_copy(unpack);
  pack.insert(pack.end(), unpack.begin(), unpack.end());
  KOLO_RETURN_IF_ERROR(upload_descs(pack));
  const auto* dev = static_cast<const CopyDesc*>(descs_dev_.data());
  KOLO_CUDA_RETURN(launch_batched_copy(dev, static_cast<int>(n), chunks, stream_));
  // The padding between slots is reduced along with the data and never copied out.
  KOLO_RETURN_IF_ERROR(
      reduce_on_stream(fusion, total / dtype_size(r.dtype), r.dtype, r.reduce_op, r.prescale, r.postscale));
  KOLO_CUDA_RETURN(launch_batched_copy(dev + n, static_cast<int>(n), chunks, stream_));
  return Status::ok();
}

Status NcclExecutor::broadcast(const Response& r, std::vector<TensorEntry>& entries) {
  KOLO_NCCL_RETURN(ncclGroupStart());
  for (TensorEntry& e : entries) {
    Status s = KOLO_NCCL_STATUS(ncclBroadcast(e.view.data, e.view.data, e.view.num_bytes(), ncclUint8, r.root, comm_, stream_));
    if (!s.is_ok()) {
      ncclGroupEnd();
      return s;
    }
  }
  KOLO_NCCL_RETURN(ncclGroupEnd());
  return Status::ok();
}

// Ragged allgather as one NCCL group of broadcasts, rank q's rows from q into its slot: no
// padding to the largest rank and no second copy to compact the result. The result is the
// handle's host Tensor (kolo's allgather API returns a CPU tensor).
Status NcclExecutor::allgather(const Response& r, std::vector<TensorEntry>& entries) {
  TensorEntry& e = entries.at(0);
  int64_t total_rows = 0;
  const size_t row_bytes = prepare_allgather_output(r, e, &total_rows);
  Tensor& out = e.handle->extra().gathered;
  if (out.bytes.empty()) return Status::ok();
  KOLO_RETURN_IF_ERROR(gather_.reserve(out.bytes.size()));
  auto* dst = static_cast<std::byte*>(gather_.data());
  KOLO_NCCL_RETURN(ncclGroupStart());
  size_t at = 0;
  for (size_t q = 0; q < r.sizes.size(); ++q) {
    const size_t bytes = static_cast<size_t>(r.sizes[q]) * row_bytes;
    Status s = KOLO_NCCL_STATUS(ncclBroadcast(e.view.data, dst + at, bytes, ncclUint8, static_cast<int>(q), comm_, stream_));
    if (!s.is_ok()) {
      ncclGroupEnd();
      return s;
    }
    at += bytes;
  }
  KOLO_NCCL_RETURN(ncclGroupEnd());
  // Through pinned memory and the bounded wait: a copy straight into the (pageable) host
  // Tensor would block this thread inside cudaMemcpyAsync until the broadcasts finished,
  // forever if a peer is gone.
  KOLO_RETURN_IF_ERROR(gather_host_.reserve(out.bytes.size()));
  KOLO_CUDA_RETURN(cudaMemcpyAsync(gather_host_.data(), dst, out.bytes.size(), cudaMemcpyDeviceToHost, stream_));
  KOLO_RETURN_IF_ERROR(finish());
  std::memcpy(out.bytes.data(), gather_host_.data(), out.bytes.size());
  return Status::ok();
}

Status NcclExecutor::to_host(Tensor& out) {
  KOLO_RETURN_IF_ERROR(gather_host_.reserve(out.bytes.size()));
  KOLO_CUDA_RETURN(cudaMemcpyAsync(gather_host_.data(), gather_.data(), out.bytes.size(), cudaMemcpyDeviceToHost, stream_));
  KOLO_RETURN_IF_ERROR(finish());
  std::memcpy(out.bytes.data(), gather_host_.data(), out.bytes.size());
  return Status::ok();
}

// Alltoall as one NCCL group of sends and receives (NCCL has no alltoallv): block j of the
// input to rank j, rank j's block into its place in device scratch; then to the host Tensor.
Status NcclExecutor::alltoall(const Response& r, std::vector<TensorEntry>& entries) {
  TensorEntry& e = entries.at(0);
  std::vector<int64_t> send_rows, recv_rows;
  // GPU tensors have no output form (runtime.cc refuses it): the result is the handle's.
  void* dest = nullptr;
  Status unfit;
  const size_t row_bytes = prepare_alltoall_output(r, rank_, size_, e, &send_rows, &recv_rows, &dest, &unfit);
  Tensor& out = e.handle->extra().gathered;
  if (row_bytes == 0) return Status::ok();
  KOLO_RETURN_IF_ERROR(gather_.reserve(std::max<size_t>(1, out.bytes.size())));
  const auto* src = static_cast<const std::byte*>(e.view.data);
  auto* dst = static_cast<std::byte*>(gather_.data());
  KOLO_NCCL_RETURN(ncclGroupStart());
  size_t s_at = 0, r_at = 0;
  for (int j = 0; j < size_; ++j) {
    const size_t sb = static_cast<size_t>(send_rows[j]) * row_bytes, rb = static_cast<size_t>(recv_rows[j]) * row_bytes;
    Status s;
    if (sb > 0) s = KOLO_NCCL_STATUS(ncclSend(src + s_at, sb, ncclUint8, j, comm_, stream_));
    if (s.is_ok() && rb > 0) s = KOLO_NCCL_STATUS(ncclRecv(dst + r_at, rb, ncclUint8, j, comm_, stream_));
    if (!s.is_ok()) {
      ncclGroupEnd();
      return s;
    }
    s_at += sb;
    r_at += rb;
  }
  KOLO_NCCL_RETURN(ncclGroupEnd());
  if (out.bytes.empty()) return Status::ok();
  return to_host(out);
}

// Reducescatter: ncclReduceScatter when every rank's part is the same size, else one NCCL
// group of ncclReduce calls (rank j is the root of its own part: Horovod's uneven split).
// The input stays untouched: a prescale works on a copy in device scratch.
Status NcclExecutor::reducescatter(const Response& r, std::vector<TensorEntry>& entries) {
  const size_t esize = dtype_size(r.dtype);
  for (TensorEntry& e : entries) {
    int64_t first_row = 0, rows = 0;
    const size_t row_elems = prepare_reducescatter_output(r, rank_, size_, e, &first_row, &rows);
    Tensor& out = e.handle->extra().gathered;
    const size_t total = static_cast<size_t>(e.view.num_elements());
    if (total == 0) continue;
    const size_t mine = static_cast<size_t>(rows) * row_elems;
    const std::byte* in = static_cast<const std::byte*>(e.view.data);
    KOLO_RETURN_IF_ERROR(gather_.reserve(std::max<size_t>(1, mine * esize)));
    if (r.prescale != 1.0) {
      KOLO_RETURN_IF_ERROR(fusion_.reserve(total * esize));
      KOLO_CUDA_RETURN(cudaMemcpyAsync(fusion_.data(), in, total * esize, cudaMemcpyDeviceToDevice, stream_));
      KOLO_CUDA_RETURN(launch_scale(fusion_.data(), total, r.dtype, r.prescale, stream_));
      in = static_cast<const std::byte*>(fusion_.data());
    }
    const int64_t dim0 = e.view.shape[0];
    if (dim0 % size_ == 0) {
      KOLO_NCCL_RETURN(ncclReduceScatter(in, gather_.data(), mine, nccl_dtype(r.dtype), nccl_op(r.dtype, r.reduce_op), comm_,
                                         stream_));
    } else {
      KOLO_NCCL_RETURN(ncclGroupStart());
      for (int j = 0; j < size_; ++j) {
        int64_t lo = 0;
        const size_t count = static_cast<size_t>(reducescatter_rows(dim0, size_, j, &lo)) * row_elems;
        if (count == 0) continue;
        Status s = KOLO_NCCL_STATUS(ncclReduce(in + static_cast<size_t>(lo) * row_elems * esize, gather_.data(), count,
                                               nccl_dtype(r.dtype), nccl_op(r.dtype, r.reduce_op), j, comm_, stream_));
        if (!s.is_ok()) {
          ncclGroupEnd();
          return s;
        }
      }
      KOLO_NCCL_RETURN(ncclGroupEnd());
    }
    KOLO_CUDA_RETURN(launch_postscale(gather_.data(), mine, r.dtype, r.reduce_op, size_, r.postscale, stream_));
    if (!out.bytes.empty()) KOLO_RETURN_IF_ERROR(to_host(out));
  }
  return Status::ok();
}

Status NcclExecutor::allreduce_buffer(int device, void* buf, size_t count, DType t, ReduceOp op, double prescale,
                                      double postscale) {
  KOLO_RETURN_IF_ERROR(check_reducible(t, ""));
  KOLO_RETURN_IF_ERROR(hier_ ? ensure_hierarchical(device) : ensure_comm(device));
  Status s = reduce_on_stream(buf, count, t, op, prescale, postscale);
  if (!s.is_ok()) return s.code() == Status::Code::kInvalidArgument ? s : fail(s);
  return finish();
}

Status NcclExecutor::reducescatter_buffer(int device, const void* send, void* recv, size_t recv_count, DType t,
                                          ReduceOp op) {
  KOLO_RETURN_IF_ERROR(check_reducible(t, ""));
  KOLO_RETURN_IF_ERROR(ensure_comm(device));
  KOLO_NCCL_RETURN(ncclReduceScatter(send, recv, recv_count, nccl_dtype(t), nccl_op(t, op), comm_, stream_));
  KOLO_CUDA_RETURN(launch_postscale(recv, recv_count, t, op, size_, 1.0, stream_));
  return finish();
}

}  // namespace kolo::ops::gpu

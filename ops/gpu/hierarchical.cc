// HierarchicalAllreduce: local NCCL reduce-scatter, MPI across hosts, local all-gather.
#include "ops/gpu/hierarchical.h"

#include <climits>
#include <cstring>
#include <string>

#include "ops/gpu/cuda_check.h"
#include "ops/gpu/event_wait.h"
#include "ops/gpu/nccl_types.h"
#include "ops/mpi_util.h"

namespace kolo::ops::gpu {

HierarchicalAllreduce::HierarchicalAllreduce(MPI_Comm data_comm, MPI_Comm local_comm, MPI_Comm cross_comm)
    : data_comm_(data_comm), local_comm_(local_comm), cross_comm_(cross_comm) {
  MPI_Comm_rank(local_comm_, &local_rank_);
  MPI_Comm_size(local_comm_, &local_size_);
  MPI_Comm_size(cross_comm_, &cross_size_);
}

HierarchicalAllreduce::~HierarchicalAllreduce() {
  if (staged_) cudaEventDestroy(staged_);
  if (comm_) ncclCommDestroy(comm_);
}

void HierarchicalAllreduce::abort() {
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
}

Status HierarchicalAllreduce::ensure_comm(int device) {
  if (comm_) return Status::ok();
  // Equal hosts: every rank must see the same local size, or shards would not pair up.
  int sizes[2] = {local_size_, -local_size_}, extremes[2] = {0, 0};
  KOLO_RETURN_IF_ERROR(
      mpi_status(MPI_Allreduce(sizes, extremes, 2, MPI_INT, MPI_MAX, data_comm_), "MPI_Allreduce(local sizes)"));
  if (extremes[0] != -extremes[1]) {
    return Status::invalid_argument("KOLO_HIERARCHICAL_ALLREDUCE=1 needs the same number of ranks on every host (" +
                                    std::to_string(-extremes[1]) + " to " + std::to_string(extremes[0]) + " here)");
  }
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  Status local = KOLO_CUDA_STATUS(cudaSetDevice(device));
  if (local.is_ok() && local_rank_ == 0) local = KOLO_NCCL_STATUS(ncclGetUniqueId(&id));
  int ok = local.is_ok() ? 1 : 0, all_ok = 0;
  KOLO_RETURN_IF_ERROR(mpi_status(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, data_comm_), "MPI_Allreduce"));
  if (!all_ok) return local.is_ok() ? Status::communication("hierarchical NCCL setup failed on another rank") : local;
  KOLO_RETURN_IF_ERROR(mpi_status(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, local_comm_), "MPI_Bcast(local ncclUniqueId)"));
  ncclComm_t comm = nullptr;
  local = KOLO_NCCL_STATUS(ncclCommInitRank(&comm, local_size_, id, local_rank_));
  ok = local.is_ok() ? 1 : 0;
  KOLO_RETURN_IF_ERROR(mpi_status(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, data_comm_), "MPI_Allreduce"));
  if (!all_ok) {
    if (local.is_ok()) ncclCommDestroy(comm);
    return local.is_ok() ? Status::communication("host-local ncclCommInitRank failed on another rank") : local;
  }
  comm_ = comm;
  return Status::ok();
}

Status HierarchicalAllreduce::allreduce(void* buf, size_t count, DType t, ReduceOp op, cudaStream_t stream) {
  if (count == 0) return Status::ok();
  const size_t esize = dtype_size(t);
  const size_t shard = (count + static_cast<size_t>(local_size_) - 1) / static_cast<size_t>(local_size_);
  if (shard > static_cast<size_t>(INT_MAX)) {
    return Status::invalid_argument("hierarchical allreduce: a shard of " + std::to_string(shard) +
                                    " elements exceeds MPI's int count");
  }
  const size_t padded_count = shard * static_cast<size_t>(local_size_);
  void* work = buf;
  if (padded_count != count) {
    // The tail of the last shard is reduced along (whatever it holds) and never copied out.
    KOLO_RETURN_IF_ERROR(padded_.reserve(padded_count * esize));
    work = padded_.data();
    KOLO_CUDA_RETURN(cudaMemcpyAsync(work, buf, count * esize, cudaMemcpyDeviceToDevice, stream));
  }
  KOLO_RETURN_IF_ERROR(shard_.reserve(shard * esize));
  KOLO_NCCL_RETURN(ncclReduceScatter(work, shard_.data(), shard, nccl_dtype(t), nccl_op(t, op), comm_, stream));
  if (cross_size_ > 1) {
    KOLO_RETURN_IF_ERROR(host_.reserve(shard * esize));
    KOLO_CUDA_RETURN(cudaMemcpyAsync(host_.data(), shard_.data(), shard * esize, cudaMemcpyDeviceToHost, stream));
    // The shard must be on the host before MPI reads it: wait, bounded (event_wait.h).
    if (!staged_) KOLO_CUDA_RETURN(cudaEventCreateWithFlags(&staged_, cudaEventDisableTiming));
    KOLO_CUDA_RETURN(cudaEventRecord(staged_, stream));
    KOLO_RETURN_IF_ERROR(wait_event_bounded(staged_, {comm_}, kGpuPeerTimeout, "the host-local NCCL reduce-scatter"));
    KOLO_RETURN_IF_ERROR(mpi_status(MPI_Allreduce(MPI_IN_PLACE, host_.data(), static_cast<int>(shard), mpi_dtype(t),
                                                  mpi_reduce_op(t, op), cross_comm_),
                                    "MPI_Allreduce(across hosts)"));
    KOLO_CUDA_RETURN(cudaMemcpyAsync(shard_.data(), host_.data(), shard * esize, cudaMemcpyHostToDevice, stream));
  }
  KOLO_NCCL_RETURN(ncclAllGather(shard_.data(), work, shard, nccl_dtype(t), comm_, stream));
  if (work != buf) KOLO_CUDA_RETURN(cudaMemcpyAsync(buf, work, count * esize, cudaMemcpyDeviceToDevice, stream));
  return Status::ok();
}

}  // namespace kolo::ops::gpu

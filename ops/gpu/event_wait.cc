// Bounded wait on a CUDA event with NCCL error checks: ops/gpu/event_wait.h.
#include "ops/gpu/event_wait.h"

#include <thread>

#include "ops/gpu/cuda_check.h"

namespace kolo::ops::gpu {

Status wait_event_bounded(cudaEvent_t event, std::initializer_list<ncclComm_t> comms,
                          std::chrono::milliseconds timeout, const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (;;) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return Status::ok();
    if (e != cudaErrorNotReady) return cuda_status(e, "cudaEventQuery", __FILE__, __LINE__);
    for (ncclComm_t c : comms) {
      if (c == nullptr) continue;
      ncclResult_t async = ncclSuccess;
      Status s = nccl_status(ncclCommGetAsyncError(c, &async), "ncclCommGetAsyncError", __FILE__, __LINE__);
      if (s.is_ok() && async != ncclSuccess && async != ncclInProgress)
        s = nccl_status(async, "NCCL collective (asynchronous error)", __FILE__, __LINE__);
      if (!s.is_ok()) return s;
    }
    const auto waited = Clock::now() - start;
    if (waited > timeout) {
      return Status::timeout(what + " did not finish within " +
                             std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
                             " s: a peer rank is gone or stuck (its NCCL communicator is aborted)");
    }
    if (waited < std::chrono::milliseconds(1)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace kolo::ops::gpu

// ops/gpu/event_wait.h — the one way ops/gpu waits for device work that depends on peers.
//
// A CUDA event recorded after an NCCL collective completes only when every peer takes part.
// cudaEventSynchronize / cudaStreamSynchronize would block the coordinator forever if a peer
// died or the network failed, so this polls the event instead: between polls it asks each
// NCCL communicator for an asynchronous error (a failed peer surfaces there), and it gives up
// after `timeout` with a kTimeout that names `what` and how long it waited. The caller then
// aborts its communicators (they are unusable after either failure).
// Back-off: yield for the first millisecond (collectives of a training step finish within
// it), then sleep 50 µs per poll so a waiting rank leaves its core to training threads.
// Thread safety: call from the thread that owns the communicators (the coordinator).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <initializer_list>
#include <string>

#include "kolo/status.h"

namespace kolo::ops::gpu {

// How long a GPU collective may take once enqueued before kolo calls its peers lost.
// Generous: the first collective on a communicator also sets up NCCL's channels.
constexpr std::chrono::seconds kGpuPeerTimeout{120};

// Waits for `event` (already recorded); null communicators in `comms` are skipped.
Status wait_event_bounded(cudaEvent_t event, std::initializer_list<ncclComm_t> comms,
                          std::chrono::milliseconds timeout, const std::string& what);

}  // namespace kolo::ops::gpu

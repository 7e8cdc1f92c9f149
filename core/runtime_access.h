// core/runtime_access.h — what the runtime's entry points outside core/runtime.cc and
// core/collectives.cc (the process-set API, core/process_set_api.cc; the dist KVStore,
// kvstore/) need of the one process-wide runtime that core/runtime.cc owns, behind the same
// gate as a submission (docs/correctness.md, findings 5 and 20).
//
// A RuntimeLease enters the gate: while it lives, kolo::shutdown() on another thread waits
// before it tears anything down, so the pointers stay valid. Once shutdown() has begun, a new
// lease is refused with the shutdown message. Rules for holders:
//   - Never wait on a kolo collective while holding a lease: shutdown() waits for the lease
//     before it stops the coordinator, and the collective would wait for the coordinator.
//   - A lease held across a wait of one's own (the dist KVStore's MPI waits) must end that
//     wait once closing() turns true: shutdown() spins until every lease is gone.
//
// Ownership: the pointers are the runtime's, valid while the lease lives.
// Thread safety: any thread; the registry and the queue are thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/process_set.h"
#include "core/tensor_queue.h"
#include "kolo/status.h"

namespace kolo::detail {

struct RuntimeAccess {
  ProcessSetRegistry* sets;
  TensorQueue* queue;
  int rank;
  int size;
};

class RuntimeLease {
 public:
  // Throws kolo::Error: "not initialised", or the shutdown message once shutdown() began.
  RuntimeLease();
  ~RuntimeLease();
  RuntimeLease(const RuntimeLease&) = delete;
  RuntimeLease& operator=(const RuntimeLease&) = delete;

  const RuntimeAccess* operator->() const { return &access_; }

  // Whether kolo::shutdown() has begun (a holder's wait must then end).
  static bool closing();
  // The error a call racing shutdown() ends with.
  static Status shut_down_status();

 private:
  RuntimeAccess access_{};
};

// Hooks that kolo::shutdown() runs after the last lease ended and before MPI is finalized,
// for a client with threads of its own on MPI (the dist KVStore's heartbeats), which stops
// them here. The hooks and the finalize run under one lock.
int add_before_finalize(std::function<void()> hook);
// Removes a hook; with `run`, runs it first unless shutdown() already has (a client that is
// refused a lease cleans up this way: shutdown() may be about to finalize MPI).
void remove_before_finalize(int id, bool run);

// kolo::add_process_set, with `what` naming the caller in errors ("KOLO_PROCESS_SETS").
int32_t add_process_set_as(const std::vector<int>& ranks, const std::string& what);

}  // namespace kolo::detail

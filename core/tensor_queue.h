// core/tensor_queue.h — where training threads leave collectives for the coordinator.
//
// push() records the tensor under its name and queues its Request; the coordinator takes
// the new requests each cycle (take_requests) and, once rank 0 has decided, takes the
// entries by name to execute them (take_entries). A name already pending is a duplicate:
// the new handle fails at once and a flagged request makes the collective fail everywhere.
//
// Ownership: entries hold the user's TensorView (memory owned by the user) and a shared
// reference to the handle state.
// Thread safety: every member is safe to call from any thread (one internal mutex).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/handle_state.h"
#include "core/message.h"
#include "kolo/tensor.h"

namespace kolo {

struct TensorEntry {
  TensorView view;
  Request request;
  std::shared_ptr<detail::HandleState> handle;
};

class TensorQueue {
 public:
  // Queues `entry`; returns false (and completes its handle with an error) if the queue is
  // closed. Wakes the coordinator.
  bool push(TensorEntry entry);
  // Moves out the requests queued since the last call.
  std::vector<Request> take_requests();
  // Removes and returns the entries for `names` (nullptr-free; a missing name is an error).
  Status take_entries(const std::vector<std::string>& names, std::vector<TensorEntry>* out);
  // Blocks until a request is queued, the queue is closed, or `timeout` passes.
  void wait_for_work(std::chrono::microseconds timeout);
  bool has_requests();
  // Fails every pending entry with `reason` and refuses later pushes with it.
  void close(const Status& reason);
  // Wakes a waiting coordinator (used by shutdown).
  void notify();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, TensorEntry> entries_;  // guarded by mu_
  std::vector<Request> requests_;                          // guarded by mu_
  bool closed_ = false;                                    // guarded by mu_
  Status close_reason_;                                    // guarded by mu_
  bool wake_ = false;                                      // guarded by mu_
};

}  // namespace kolo

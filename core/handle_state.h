// core/handle_state.h — the shared state behind a kolo::Handle: completion flag, outcome and
// (for allgather) the gathered tensor.
//
// Ownership: shared by the user's Handle copies and the runtime's queue entry.
// Thread safety: complete() is called once, by the coordinator thread (or by the submitting
// thread for errors found before queueing); everything else from any thread.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>

#include "kolo/handle.h"
#include "kolo/status.h"
#include "kolo/tensor.h"

namespace kolo::detail {

struct HandleState {
  HandleState(std::string tensor_name, OpKind op_kind) : name(std::move(tensor_name)), kind(op_kind) {}
  ~HandleState();

  // Marks done with `s` and wakes waiters. Later calls are ignored.
  void complete(Status s);
  // Blocks until done.
  void wait();

  const std::string name;
  const OpKind kind;  // which collective: decides what the handle may be asked for
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;         // guarded by mu
  bool observed = false;     // guarded by mu: someone looked at `status`
  Status status;             // written before done is set; read-only afterwards
  Tensor gathered;           // allgather output; written by the coordinator before done
  int join_last_rank = -1;   // kolo::join(): the last rank to join; written before done
};

}  // namespace kolo::detail

// core/handle_state.h — the shared state behind a kolo::Handle: completion flag, outcome and
// (for allgather) the gathered tensor.
//
// Ownership: shared by the user's Handle copies and the runtime's queue entry.
// Thread safety: complete() is called once, by the coordinator thread (or by the submitting
// thread for errors found before queueing); everything else from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kolo/handle.h"
#include "kolo/status.h"
#include "kolo/tensor.h"

namespace kolo::detail {

struct HandleState {
  HandleState(std::string tensor_name, OpKind op_kind) : name(std::move(tensor_name)), kind(op_kind) {}
  ~HandleState();

  // Marks done with `s` and wakes waiters. Later calls are ignored.
  void complete(Status s);
  // Blocks until done; once `finished` it returns without taking `mu`. Where the runtime
  // allows it, the waiting thread first does the coordinator's work itself (core/wait_help.h).
  void wait();
  // Blocks until done or `timeout` passed; true when done. Helps as wait() does, but only
  // with passes expected to end before the deadline.
  bool wait_for(std::chrono::milliseconds timeout);

  const std::string name;
  const OpKind kind;  // which collective: decides what the handle may be asked for
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;         // guarded by mu
  // == done, set under mu after `status` (and every result) is written; read without mu. An
  // acquire load that sees it true sees the outcome: status(), wait() and done() need no lock.
  std::atomic<bool> finished{false};
  std::atomic<bool> observed{false};  // someone looked at `status` (read once done)
  Status status;             // written before done is set; read-only afterwards
  // Allgather, alltoall, reducescatter: this rank's result; alltoall: the rows received
  // from each rank. Written by the coordinator before done.
  Tensor gathered;
  std::vector<int64_t> received_splits;
  // Alltoall into the caller's memory (kolo::alltoall's output forms): the received rows go
  // to `into` instead of `gathered` when it can take them (prepare_alltoall_output). Set
  // before the submission is queued; read-only afterwards.
  TensorView into;
  bool has_into = false;
  // Why `into` cannot be used, found at submit from what this rank knows alone (dtype,
  // trailing dimensions, overlap with the input, null, scalar, device): the rank still takes
  // part in the exchange (its peers get their rows), its received rows go to `gathered`,
  // dropped, and the handle fails with this. Ok when `into` passed those checks.
  Status into_error;

  // Grouped collectives. A member's state (never seen by the user) hands its outcome and
  // result to its group's state when it completes; the group's state completes with the
  // last member, failed with the first member error. Guarded by the group's mu.
  std::shared_ptr<HandleState> group;  // on members
  size_t member_index = 0;             // on members
  bool is_group = false;               // on the group's state
  size_t remaining = 0;                // on the group's state: members not yet complete
  Status group_status;                 // on the group's state: the first member failure
  std::vector<Tensor> outputs;         // on the group's state: allgather/reducescatter results
  // On the group's state: when its waiters were last woken before it completed (or when it
  // was made); handle.cc, kGroupWakePeriod.
  std::chrono::steady_clock::time_point last_wake{};
  int join_last_rank = -1;   // kolo::join(): the last rank to join; written before done
  bool is_join = false;      // the handle of kolo::join_async()
};

// A new state for one collective. Its memory comes from a bounded cache of freed states'
// blocks kept per thread (handle.cc), so that a training loop's submit does not go to the
// allocator for every tensor; a state may be freed on any thread (the block then joins that
// thread's cache, or the allocator once the cache is full or the thread is exiting).
std::shared_ptr<HandleState> make_handle_state(std::string name, OpKind kind);

// The state of a group of `members` collectives of `kind` named `name`, and of its members
// (returned in *members, their `group` set).
std::shared_ptr<HandleState> make_group_state(const std::string& name, OpKind kind, size_t members,
                                              std::vector<std::shared_ptr<HandleState>>* member_states);

}  // namespace kolo::detail

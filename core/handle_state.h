// core/handle_state.h — the shared state behind a kolo::Handle: completion flag, outcome and
// (for allgather and the like) the result.
//
// Layout: what every collective touches -- its flags, outcome, name and a pointer to the
// rest -- is 88 bytes, so that with the shared_ptr's counts the state fills two cache lines
// (make_handle_state's blocks are 64-byte aligned). The 1,000 x 4 KB burst (issue #17) writes
// a fresh state per tensor and the coordinator completes it a step later, when every line of
// it has left the caches: each line is a miss on both threads. Results, alltoall outputs,
// groups and join live in HandleExtra, made only for the collectives that use it.
//
// Ownership: shared by the user's Handle copies and the runtime's queue entry.
// Thread safety: complete() is called by the coordinator thread (or by the submitting
// thread for errors found before queueing); the first call wins. Everything else from any
// thread. extra() (which may make the cold part) only from the submitting thread before the
// push or from the coordinator before completion; after `finished`, readers use extra_.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kolo/handle.h"
#include "kolo/status.h"
#include "kolo/tensor.h"

namespace kolo::detail {

struct HandleState;

// The part of a state that only some collectives use. Written before completion, read-only
// afterwards (except the group fields, guarded by group_mu).
struct HandleExtra {
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
  // last member, failed with the first member error. Guarded by the group's group_mu.
  std::shared_ptr<HandleState> group;  // on members
  size_t member_index = 0;             // on members
  bool is_group = false;               // on the group's state
  std::mutex group_mu;                 // on the group's state
  size_t remaining = 0;                // on the group's state: members not yet complete
  Status group_status;                 // on the group's state: the first member failure
  std::vector<Tensor> outputs;         // on the group's state: allgather/reducescatter results
  // On the group's state: when its waiters were last woken before it completed (or when it
  // was made); handle.cc, kGroupWakePeriod.
  std::chrono::steady_clock::time_point last_wake{};
  int join_last_rank = -1;  // kolo::join(): the last rank to join; written before done
  bool is_join = false;     // the handle of kolo::join_async()
};

struct HandleState {
  // Kinds that return a tensor (allgather, alltoall, reducescatter) get their HandleExtra
  // here, so that the Handle's accessors always find one.
  HandleState(std::string tensor_name, OpKind op_kind) : kind(op_kind), name(std::move(tensor_name)) {
    if (kind == OpKind::kAllgather || kind == OpKind::kAlltoall || kind == OpKind::kReducescatter) extra();
  }
  ~HandleState();

  // Marks done with `s` and wakes waiters. Later calls are ignored (a call that loses a race
  // with another returns at once, possibly before the winner has set `finished`).
  void complete(Status s);
  // Blocks until done; once `finished` it returns at once. Where the runtime allows it, the
  // waiting thread first does the coordinator's work itself (core/wait_help.h); then it
  // sleeps on `sleep_word` (a futex: no mutex or condition variable in the state).
  void wait();
  // Blocks until done or `timeout` passed; true when done. Helps as wait() does, but only
  // with passes expected to end before the deadline.
  bool wait_for(std::chrono::milliseconds timeout);
  // Wakes the threads sleeping in wait() without completing (they go back to sleep): a
  // group's periodic wake-up (handle.cc, kGroupWakePeriod).
  void nudge();

  // The cold part; made on first use (see the thread-safety note above).
  HandleExtra& extra() {
    if (!extra_) extra_ = std::make_unique<HandleExtra>();
    return *extra_;
  }
  bool is_group() const { return extra_ && extra_->is_group; }

  // Set once `status` is written; read without a lock. An acquire load that sees it true
  // sees the outcome (and every result): status(), wait() and done() need no lock.
  std::atomic<bool> finished{false};
  std::atomic<bool> observed{false};  // someone looked at `status` (read once done)
  const OpKind kind;                  // which collective: decides what the handle may be asked for
  std::atomic<bool> claimed{false};   // complete() has been called (the first call writes)
  // 0: nobody sleeps; 1: a waiter sleeps (or is about to) and complete() must wake it;
  // 2: complete() has passed (futex word, handle.cc).
  std::atomic<uint32_t> sleep_word{0};
  Status status;  // written before `finished` is set; read-only afterwards
  std::unique_ptr<HandleExtra> extra_;
  const std::string name;
};

// A new state for one collective. Its memory comes from a bounded cache of freed states' blocks kept per thread
// (handle.cc), so that a training loop's submit does not go to the allocator for every
// tensor; a state may be freed on any thread (the block then joins that thread's cache, or
// the allocator once the cache is full or the thread is exiting).
std::shared_ptr<HandleState> make_handle_state(std::string name, OpKind kind);

// The state of a group of `members` collectives of `kind` named `name`, and of its members
// (returned in *members, their `group` set).
std::shared_ptr<HandleState> make_group_state(const std::string& name, OpKind kind, size_t members,
                                              std::vector<std::shared_ptr<HandleState>>* member_states);

}  // namespace kolo::detail

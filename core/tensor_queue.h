// core/tensor_queue.h — where training threads leave collectives for the coordinator.
//
// push() records the tensor under its name and queues its Request; the coordinator takes
// the new requests each cycle (take_requests) and, once rank 0 has decided, takes the
// entries by name to execute them (take_entries), and releases their names once executed
// (release), right before their handles complete.
//
// Duplicates: a name is reserved from push() until release(), i.e. until its handle is about
// to complete. A push of a reserved name is refused on this rank at once: the new handle
// fails, nothing is sent to peers, and the collective already in flight under that name is
// unaffected (Horovod's rule). Holding the name through execution (not only until rank 0
// decided) is what keeps a resubmission during execution from becoming a second round on
// this rank alone, which would pair with the peers' next round (docs/runtime.md).
//
// Steady state allocates nothing: entries live in per-name slots reused every step
// (core/slot_table.h), and requests and entries are copied into the caller's buffers,
// whose elements (shapes, names) keep their capacity from one step to the next.
//
// Ownership: entries hold the user's TensorView (memory owned by the user) and a shared
// reference to the handle state.
// Thread safety: every member is safe to call from any thread (one internal mutex); the
// buffers passed to take_requests/take_entries belong to the caller (the coordinator).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/handle_state.h"
#include "core/message.h"
#include "core/slot_table.h"
#include "kolo/tensor.h"

namespace kolo {

struct TensorEntry {
  TensorView view;
  Request request;
  std::shared_ptr<detail::HandleState> handle;
  uint32_t slot = 0;  // the queue's slot for the name (what release() frees)
  uint64_t seq = 0;   // push order: 1, 2, ... per queue
  // The coordinator's: where the response cache may hold this request (a hint it checks,
  // ResponseCache::kNoHint when it knows none). take_slots sets it; take_entries clears it.
  uint32_t cache_hint = UINT32_MAX;
};

class TensorQueue {
 public:
  // Queues one collective on `view` under `name`. `header` gives rank, kind, reduce op, root
  // and scale factors; name, dtype, shape and device are taken from `name` and `view`.
  // Returns false (and completes `handle` with an error) if the queue is closed or the name
  // is reserved (pending or executing). Wakes the coordinator if it is waiting, unless `wake`
  // is false: the pushing thread waits on the handle next and runs the pass itself (the
  // request is still marked as work, so a coordinator that looks finds it).
  bool push(const TensorView& view, const std::string& name, const Request& header,
            std::shared_ptr<detail::HandleState> handle, bool wake = true);
  // Queues a group's members (views[i] under (*handles)[i]->name) as one: every member or
  // none. If any member's name is reserved (or the queue is closed, or in a join) every
  // member's handle fails with that reason and nothing is queued, so two threads submitting
  // one group name at once never leave half of each group in flight. Moves the handles out.
  bool push_group(const std::vector<TensorView>& views, const Request& header,
                  std::vector<std::shared_ptr<detail::HandleState>>* handles, bool wake = true);
  // Swaps the requests queued since the last call into *out and returns how many there are:
  // (*out)[0..n) are the requests; elements past n are spare buffers the queue reuses.
  // `slots`, if given: (*slots)[i] is the slot of (*out)[i]'s name (what take_slots takes),
  // so that the coordinator need not look the name up again.
  size_t take_requests(std::vector<Request>* out, std::vector<uint32_t>* slots = nullptr);
  // Moves the entries for `names` into *out (resized to names.size(); out's element buffers
  // are reused, not freed). The names stay reserved until release(). A name that is not
  // pending (never pushed, or already taken) is an error and takes nothing — unless
  // `skip_missing`, when such names are left out of *out. So is a name pending on another
  // process set than `process_set` (Request::process_set). With `skip_missing` (an error
  // response), entries whose request the coordinator has not taken yet are left out too:
  // rank 0 cannot have meant them (a thread woken by one error of a list may resubmit the
  // name on another set before the coordinator reaches that set's error in the same list).
  Status take_entries(const std::vector<std::string>& names, std::vector<TensorEntry>* out,
                      bool skip_missing = false, int32_t process_set = 0);
  // take_entries by slot (as take_requests gave them) instead of by name: no name is hashed.
  // Each slot must hold a pending entry on the global set whose request was taken; else an
  // error naming the slot, and nothing is taken. (*out)[i].cache_hint = hints[i].
  // REQUIRES: distinct slots (the coordinator holds each name once).
  Status take_slots(const std::vector<uint32_t>& slots, const std::vector<uint32_t>& hints,
                    std::vector<TensorEntry>* out);
  // How many collectives on `process_set` this rank has submitted and not yet completed.
  size_t pending_in_set(int32_t process_set);
  // Frees the names of `entries` (taken by take_entries) for their next submission. Call it
  // before completing their handles, so that a thread woken by its handle may resubmit.
  void release(const std::vector<TensorEntry>& entries);
  // kolo::join(): this rank has no more data. From then until complete_join, push() refuses
  // new collectives on this rank. Wakes the coordinator. Refused when the queue is closed
  // (the handle fails at once with the close reason; returns ok) or when this rank already
  // has a join pending: then the handle is left untouched and the invalid-argument error is
  // returned, for join_async() to throw (a second join is a misuse of the API, as in Horovod).
  Status push_join(std::shared_ptr<detail::HandleState> handle);
  // Coordinator: true once per push_join (call it before take_requests, so that every
  // collective pushed before the join travels no later than the join).
  bool take_join();
  // Coordinator: ends the pending join with `s`; `last_rank` is what join() returns.
  void complete_join(Status s, int last_rank);

  // Blocks until a request is queued, the queue is closed, or `timeout` passes.
  void wait_for_work(std::chrono::microseconds timeout);
  bool has_requests();
  // Whether any collective this rank submitted has not completed yet. Lock-free: the answer
  // is stored under the mutex whenever it changes; a reader gets it as of some moment, as it
  // did under the lock, where a push may land right after the reading as well.
  bool has_pending() const { return pending_.load(); }
  // Lock-free hint that work may have arrived since the last take_requests (the
  // coordinator's spin reads it without taking the mutex).
  bool maybe_work() const { return wake_hint_.load(std::memory_order_acquire); }
  // When the last push (push, push_group; refused ones too) happened: steady-clock
  // nanoseconds since its epoch, once note_push_times(true) was called (else 0: a clock
  // reading per push costs the burst of small tensors more than the deferral needs).
  // Lock-free, for the coordinator's burst deferral.
  int64_t last_push_ns() const { return last_push_ns_.load(std::memory_order_relaxed); }
  void note_push_times(bool on) { note_push_times_.store(on, std::memory_order_relaxed); }
  // Fails every pending entry with `reason` and refuses later pushes with it.
  void close(const Status& reason);
  // Wakes a waiting coordinator (used by shutdown).
  void notify();

 private:
  // Appends a copy of `q` (its name in `slot`) to requests_, reusing a spare element's buffers.
  void queue_request(const Request& q, uint32_t slot);
  // Under mu_: moves the entries of taking_ into *out (element buffers reused).
  void move_taking(std::vector<TensorEntry>* out);
  // Under mu_: why no submission may be queued now (closed, in a join), else ok.
  Status refusal(const std::string& name, const Request& header) const;
  // The error of a submission whose name is reserved.
  static Status duplicate(const std::string& name, const Request& header);
  // Under mu_: fills the entry in `slot` (acquired) and queues its request.
  void enqueue(uint32_t slot, const TensorView& view, const std::string& name, const Request& header,
               std::shared_ptr<detail::HandleState> handle);
  // Under mu_: records that work arrived; true if the coordinator must be notified.
  bool wake_locked();
  // Under mu_, after names were reserved or released: publishes has_pending's answer. Stored
  // on a change only: the coordinator's lock-free reads share its cache line, and a store on
  // every push of a burst would pull that line back from the polling core each time.
  void note_pending() {
    const bool any = entries_.in_use_count() > 0;
    if (any != pending_.load(std::memory_order_relaxed)) pending_.store(any);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  SlotTable<TensorEntry> entries_;  // guarded by mu_: pending entries by name
  std::vector<Request> requests_;   // guarded by mu_: [0, num_requests_) queued, the rest spare
  std::vector<uint32_t> request_slots_;  // guarded by mu_: the slot of each of requests_
  size_t num_requests_ = 0;         // guarded by mu_
  uint64_t pushed_ = 0;             // guarded by mu_: entries queued so far (TensorEntry::seq)
  uint64_t taken_upto_ = 0;         // guarded by mu_: pushed_ at the last take_requests
  std::vector<uint32_t> taking_;    // guarded by mu_: scratch for take_entries
  std::vector<TensorEntry> spare_;  // guarded by mu_: entry buffers kept when *out shrinks
  bool closed_ = false;             // guarded by mu_
  Status close_reason_;             // guarded by mu_
  bool wake_ = false;               // guarded by mu_: work arrived since the last take
  std::atomic<bool> wake_hint_{false};  // == wake_, written under mu_, read without it
  std::atomic<int64_t> last_push_ns_{0};
  std::atomic<bool> note_push_times_{false};
  std::shared_ptr<detail::HandleState> join_;  // guarded by mu_: the pending join
  bool join_sent_ = false;                     // guarded by mu_: take_join returned it
  // join_ && !join_sent_, written under mu_: take_join's every-pass look takes no lock.
  std::atomic<bool> join_unsent_{false};
  std::atomic<bool> pending_{false};  // entries_.in_use_count() > 0, written under mu_
};

}  // namespace kolo

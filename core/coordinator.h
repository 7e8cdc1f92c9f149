// core/coordinator.h — the one background thread per process that talks to peers.
//
// Each cycle it takes the requests training threads queued, sends them to rank 0 (rank 0
// adds its own and everyone's to the MessageTable), and executes, in order, every
// ResponseList rank 0 sends. Rank 0 fuses ready responses before sending. When idle it
// sleeps in growing steps up to KOLO_CYCLE_TIME, and wakes at once when work is queued, so
// a collective never waits out a fixed cycle.
//
// Shutdown: any rank's request_shutdown() makes rank 0 broadcast a shutdown list; every
// rank then fails its pending collectives and stops. All waits on peers are bounded.
// Dead peers: every wait consults the backend's Liveness (core/liveness.h); once a peer is
// dead, the coordinator stops and every pending and later handle fails with that error.
// Thread safety: start/request_shutdown/join from user threads; the loop runs on its own.
// Every pass of the loop holds the engine lock; a thread waiting on a handle may run passes
// itself under that lock (help(), core/wait_help.h), so the state below marked "coordinator
// thread only" belongs to whichever thread holds the engine lock.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <map>
#include <optional>
#include <mutex>
#include <memory>
#include <set>
#include <thread>

#include "core/backend.h"
#include "core/config.h"
#include "core/fast_path.h"
#include "core/idle_policy.h"
#include "core/negotiation.h"
#include "core/process_set.h"
#include "core/response_cache.h"
#include "core/set_negotiation.h"
#include "core/tensor_queue.h"
#include "core/tuning.h"
#include "core/wait_help.h"
#include "kolo/runtime.h"

namespace kolo {

class Coordinator final : public detail::WaitHelper {
 public:
  // `timeline` (may be null) is rank 0's, owned by the caller. `sets` (may be null: the
  // global set only) is the process-set registry, owned by the caller; it must outlive this.
  Coordinator(const Config& config, Backend& backend, TensorQueue& queue, Timeline* timeline = nullptr,
              ProcessSetRegistry* sets = nullptr);
  ~Coordinator();
  void start();
  // Asks the job to stop; returns at once. join() waits for this process's loop to end.
  // `reason` (optional) replaces "kolo was shut down by rank R" in every rank's errors.
  void request_shutdown(const std::string& reason = "");
  // Called from a signal handler (async-signal-safe): shut the job down because this
  // process received `signo`; the loop re-raises it once peers have been told.
  static void note_signal(int signo);
  void join();
  bool running() const { return running_.load(); }
  // Whether a thread waiting on a handle runs the passes itself (help() below): then a
  // push by a thread about to wait need not wake the loop.
  bool waiters_help() const { return idle_.helps(); }
  RuntimeStats stats() const;
  // Runs passes on the calling thread until `done`, the coordinator stops, or nothing
  // happens for the spin window; returns at once where waiters may not help (several
  // hosts, no fast path, KOLO_WAIT_HELPS=0). With a `deadline` (Handle::wait_for) it starts
  // a pass only while the longest recent pass still fits before it, so it returns by the
  // deadline unless a pass outlasts every recent one. Any thread; see core/wait_help.h.
  void help(const std::atomic<bool>& done,
            std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) override;

 private:
  void loop();
  // One pass (REQUIRES: the engine lock, idle_.engine()): a cycle, the dead-peer check, the statistics.
  // Sets *activity when anything happened; false once the coordinator has stopped.
  bool pass(bool* activity);

  // One pass; sets *activity when anything happened. An error is fatal for the runtime.
  Status root_cycle(bool* activity);
  Status worker_cycle(bool* activity);
  Status execute_list(const ResponseList& list);
  // Fills entries_ for `r`: this rank's queued tensors, or stand-ins where it has joined.
  Status take(const Response& r);
  // Runs `response` on entries_, which take just filled with status `taken`. `remember`:
  // record its requests in the response cache (the board's tensors need not: each is the
  // cached request it was found as, and no list ran since it was looked up).
  void execute_one(const Response& response, Status taken, bool remember = true);
  // Before the first response of a process set in a list, on its members: the set's own
  // rendezvous (the global one is made only for lists with global-set work).
  Status meet_set(const Response& r);
  // After a failed rendezvous: the entries take() just took for `r` fail with `why`.
  void fail_taken(const Response& r, const Status& taken, const Status& why);
  void check_stalls(bool* shutdown, std::string* reason);
  void root_drain_acks();
  // Rank 0: whether to hold this pass's ready tensors because a burst is still arriving
  // (core/burst_hold.h). Never holds a shutdown or autotune list.
  bool hold_burst(bool shutdown);
  void stop(const Status& reason);
  // The dead-peer check (core/liveness.h): `now` forces one; ok on a single rank.
  Status peer_check(bool now, const char* during, std::chrono::steady_clock::time_point at = {});
  // `dead`, unless a shutdown list from rank 0 is waiting (then its reason): a peer that
  // shut down cleanly and exited is not a dead one.
  Status shutdown_instead(const Status& dead);
  // This rank stops on an error of its own (`why`, no dead peer behind it): every peer is
  // told (core/liveness.h, announce_stop); returns the error this rank's handles get.
  Status announce_stop(const Status& why);
  // Rank 0: a request it held for the board goes into the table instead (FastPath's demotions).
  void demote_to_table(const Request& q, std::chrono::steady_clock::time_point now);
  // Test hook (KOLO_TEST_FAULT_RANK): an internal error for "kolo.test.fault" on that rank.
  Status test_fault(const Request& q) const;
  Status add_request(const Request& q, int rank, std::chrono::steady_clock::time_point now);
  // Rank 0: a peer's request list, from `source`, into the tables (its join and shutdown too).
  Status add_peer_list(const RequestList& list, int source, std::chrono::steady_clock::time_point now,
                       bool* shutdown, std::string* reason);
  // Every rank, after a list: the settings it carries (core/tuning.h).
  void apply_params(const ResponseList& list);

  // The fast path's rounds, run by the coordinator (core/coordinator_fast.cc; the fast
  // path's own state and decisions: core/fast_path.h). fast_step: resolves this rank's open
  // round (running what it agreed); then, if `offer` and no round is open, joins a peer's
  // round or opens one for new requests. Never blocks. The loop offers after it has run the
  // lists it has (a rank that is behind in lists would only make the round void).
  Status fast_step(bool* activity, bool offer = true);
  // From inside a rendezvous: joins a peer's round with nothing to offer, so that no peer
  // waits on this rank while it waits on them.
  Status fast_answer_board();
  // A pass's first step on the board: fast_step, offering new held tensors at once. *ran:
  // a round ran and the pass may end here (never two passes in a row).
  Status fast_early(bool* activity, bool* ran);
  // Resolves the open round and runs the collectives it agreed on.
  Status fast_resolve(bool* activity);

  // Constant after construction.
  const Config config_;
  Backend& backend_;
  TensorQueue& queue_;
  const Topology topo_;
  Timeline* const timeline_;  // rank 0's (null elsewhere); written while enabled (start_timeline)
  bool timeline_on() const { return timeline_ != nullptr && timeline_->enabled(); }

  // Coordinator thread only.
  MessageTable table_;  // rank 0 only: the global set
  std::vector<Request> requests_;     // reused buffer for this rank's new requests
  std::vector<uint32_t> request_slots_;  // the queue slot of each of requests_
  std::vector<TensorEntry> entries_;  // reused buffer for the entries of one response
  std::vector<std::byte> join_scratch_;  // stand-in tensors of a joined rank (core/join.h)
  Response adjusted_;                    // a response as executed with joined ranks
  ResponseCache cache_;  // identical on every rank (core/response_cache.h)
  SetNegotiation sets_;  // the other process sets (core/set_negotiation.h)
  std::set<std::string> stall_reported_;
  std::chrono::steady_clock::time_point last_stall_check_;
  bool shutdown_sent_ = false;
  std::chrono::steady_clock::time_point last_arrival_;  // rank 0: last request added
  std::chrono::steady_clock::time_point hold_start_;    // rank 0: when the current hold began
  bool holding_ = false;
  Tuning tuning_;  // the fusion threshold, and rank 0's autotuner (core/tuning.h)

  // The fast path (core/fast_path.h); coordinator thread only, but for its counters.
  FastPath fast_;

  // Written by the coordinator thread, read by stats() from any thread.
  std::atomic<uint64_t> active_cycles_{0}, collectives_{0}, tensors_{0};
  std::atomic<uint64_t> peer_requests_cached_{0}, peer_requests_full_{0};
  std::atomic<uint64_t> peer_set_requests_cached_{0}, peer_set_requests_full_{0};
  std::atomic<int64_t> coordination_ns_{0}, execution_ns_{0}, rendezvous_ns_{0};

  // Under the engine lock: the clock at the current pass's start and at the last pass's end.
  std::chrono::steady_clock::time_point pass_start_{}, pass_end_{};
  // Who runs the passes, and what the loop does between them (core/idle_policy.h).
  IdlePolicy idle_;

  std::atomic<bool> shutdown_requested_{false};
  std::mutex reason_mu_;
  std::string shutdown_reason_;  // guarded by reason_mu_
  std::string take_reason();
  std::atomic<bool> running_{false};
  std::thread thread_;
};

}  // namespace kolo

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

#include "core/autotune.h"
#include "core/backend.h"
#include "core/config.h"
#include "core/fast_board.h"
#include "core/negotiation.h"
#include "core/process_set.h"
#include "core/response_cache.h"
#include "core/tensor_queue.h"
#include "kolo/runtime.h"

namespace kolo {

class Coordinator {
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
  bool waiters_help() const { return helps_; }
  RuntimeStats stats() const;
  // Runs passes on the calling thread until `done`, the coordinator stops, or nothing
  // happens for the spin window; returns at once where waiters may not help (several
  // hosts, no fast path, KOLO_WAIT_HELPS=0). With a `deadline` (Handle::wait_for) it starts
  // a pass only while the longest recent pass still fits before it, so it returns by the
  // deadline unless a pass outlasts every recent one. Any thread; see core/wait_help.h.
  void help(const std::atomic<bool>& done,
            std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

 private:
  void loop();
  // One pass (REQUIRES: engine_mu_ held): a cycle, the dead-peer check, the statistics.
  // Sets *activity when anything happened; false once the coordinator has stopped.
  bool pass(bool* activity);

  // The idle policy (core/coordinator_idle.cc): what the loop thread does when it has no
  // pass to run, so that it neither delays a peer nor takes a core from a waiting thread.
  // Before a pass: naps (woken by wake_nap) while a waiter runs the passes or a burst is
  // still being submitted (defer_burst); returns whether it napped, and the loop then
  // starts over instead of running a pass.
  bool nap_for_helpers();
  // After a pass with no activity: one wait, by what ran last and how long ago (sleeps on
  // the queue after helped passes, polls within kSpinWindow, then sleeps in growing steps
  // up to KOLO_CYCLE_TIME; a single rank only sleeps on its queue).
  void idle_wait();
  // The loop, with KOLO_BURST_DEFER=1 where waiters help: whether to leave the requests in
  // the queue for now because this rank is still submitting a burst (a request arrived less
  // than KOLO_BURST_HOLD_MICROSECONDS ago) and no thread waits yet. The thread that submits
  // the burst will wait for it and take it whole (core/wait_help.h): one board round and
  // one fused collective, and no coordinator thread competing with the submitting thread
  // for the cores. Bounded: kDeferBursts gaps at most, then the loop takes what is there.
  bool defer_burst();
  static constexpr int kDeferBursts = 20;
  // The idle loop's short wait (and a helper's): polls the queue, the board and `done`
  // (null: none) for ~2 µs (not at all where crowded_), then yields.
  void poll_then_yield(const std::atomic<bool>* done);
  // Ends the loop's nap, or its sleep on the queue, at once.
  void wake_nap();
  // How long a rank keeps spinning after the last activity before it starts to sleep (and
  // a helper before it leaves): long enough to catch a peer's answer to what it just sent,
  // short enough to leave the core to training threads.
  static constexpr std::chrono::microseconds kSpinWindow{200};

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
  // Test hook (KOLO_TEST_FAULT_RANK): an internal error for "kolo.test.fault" on that rank.
  Status test_fault(const Request& q) const;
  Status add_request(const Request& q, int rank, std::chrono::steady_clock::time_point now);
  // Process sets (core/process_set.h, docs/collectives.md). Rank 0: the table negotiating
  // set `id`, made on first use; null if the set is not registered here.
  MessageTable* table_for(int32_t id);
  // Rank 0, after a request for q.name: fails the name on every set of the greatest group of
  // sets holding it pending that wait for each other (core/coordinator_sets.cc).
  void fail_cross_set(const Request& q);
  // Rank 0: everything negotiated on every set, in one plan (global set first); remembers
  // the other sets' requests in their caches (remember_emitted: an error there in *status).
  std::vector<Response> take_ready_all(Status* status);
  // The job ranks of set `id` as this rank knows them (null: not registered).
  const std::vector<int>* set_members(int32_t id);
  // Whether this rank executes `r` (it is in r's process set).
  bool member_of(const Response& r);
  // After the registry changed: forgets removed sets (tables, members, executors, caches).
  void forget_removed_sets();
  // Response caches of the other sets (core/response_cache.h): set `id`'s, made on first use.
  ResponseCache& set_cache(int32_t id);
  // A worker: puts `q` into `out` by cache id where its set's cache has it, else in full.
  void add_for_root(const Request& q, RequestList* out);
  // Rank 0: the requests a peer named by (set, id), into their sets' tables.
  Status add_set_cached(const std::vector<CachedInSet>& cached, int source, std::chrono::steady_clock::time_point now);
  // Rank 0, as it emits `ready`: remembers the other sets' agreed requests (set_agreed_) in
  // their caches, in list order, as the sets' members will when they execute it.
  Status remember_emitted(const std::vector<Response>& ready);
  // Autotune: rank 0 scores the list it just executed; every rank applies carried settings.
  void tune_after(const ResponseList& list);
  void tune_record(uint64_t allreduced_bytes);  // one list's or one fast round's
  void apply_params(const ResponseList& list);

  // The fast path (core/coordinator_fast.cc, core/fast_board.h, docs/runtime.md).
  // Holds `q` (its name in queue slot `slot`, taken from the queue at `now`) for the board
  // if it can go that way (an allreduce negotiated before); else returns false and the
  // caller sends it to rank 0. A held `q` is swapped out: it keeps a spare buffer's contents.
  bool fast_hold(Request& q, uint32_t slot, std::chrono::steady_clock::time_point now);
  // One pass: resolves this rank's open round (running what it agreed); then, if `offer`
  // and no round is open, joins a peer's round or opens one for new requests. Never
  // blocks. The loop offers after it has run the lists it has (a rank that is behind in
  // lists would only make the round void).
  Status fast_step(bool* activity, bool offer = true);
  // From inside a rendezvous: joins a peer's round with nothing to offer, so that no peer
  // waits on this rank while it waits on them.
  Status fast_answer_board();
  // Sends held requests to rank 0 instead (those for which `pick` is true).
  template <typename Pick>
  void fast_demote(Pick pick);
  // A join began: everything held goes to rank 0, and so does everything new until the
  // join ends.
  void fast_pause();
  // After executing a response list: its demotions, pause, and the end of a join.
  void fast_after_list(const ResponseList& list);
  // Rank 0: `q` entered the table; if peers may be holding its name on the board, they
  // must send it here instead (and so must rank 0).
  void fast_note_table(const Request& q);
  Status fast_publish();
  Status fast_resolve(bool* activity);
  // A pass's first step on the board: fast_step, offering new held tensors at once. *ran:
  // a round ran and the pass may end here (never two passes in a row).
  Status fast_early(bool* activity, bool* ran);
  Status fast_execute(const std::vector<uint32_t>& agreed);
  // take(r) for a response of fast_execute's plan, by the held tensors' queue slots where
  // the plan keeps fast_run_'s order (`*next`: the first of fast_run_ not taken yet).
  Status take_held(const Response& r, size_t* next);

  // Constant after construction.
  const Config config_;
  Backend& backend_;
  TensorQueue& queue_;
  const Topology topo_;
  // This host's ranks outnumber its CPUs: a poll gives the core away at once (the peer it
  // waits for may need it) instead of spinning first (poll_then_yield).
  const bool crowded_;
  Timeline* const timeline_;  // rank 0's (null elsewhere); written while enabled (start_timeline)
  bool timeline_on() const { return timeline_ != nullptr && timeline_->enabled(); }
  ProcessSetRegistry* const sets_;

  // Coordinator thread only.
  MessageTable table_;  // rank 0 only: the global set
  bool join_divides_by_all_ = false;  // Config::join_horovod: an average with joined ranks divides by size
  std::map<int32_t, std::unique_ptr<MessageTable>> set_tables_;  // rank 0 only: other sets
  std::vector<Response> orphans_;  // rank 0: errors for requests on sets it does not know
  std::map<int32_t, std::vector<int>> known_sets_;  // members of the sets this rank has met
  uint64_t sets_version_ = 0;                        // the registry version known_sets_ reflects
  std::vector<int32_t> met_sets_;                    // sets met in the list being executed
  std::vector<Request> requests_;     // reused buffer for this rank's new requests
  std::vector<uint32_t> request_slots_;  // the queue slot of each of requests_
  std::vector<TensorEntry> entries_;  // reused buffer for the entries of one response
  std::vector<std::byte> join_scratch_;  // stand-in tensors of a joined rank (core/join.h)
  Response adjusted_;                    // a response as executed with joined ranks
  ResponseCache cache_;  // identical on every rank (core/response_cache.h)
  std::map<int32_t, ResponseCache> set_caches_;  // other sets: on rank 0 and the set's members
  std::vector<Request> set_agreed_;              // rank 0: scratch of take_ready_all
  std::set<std::string> stall_reported_;
  std::chrono::steady_clock::time_point last_stall_check_;
  bool shutdown_sent_ = false;
  std::chrono::steady_clock::time_point last_arrival_;  // rank 0: last request added
  std::chrono::steady_clock::time_point hold_start_;    // rank 0: when the current hold began
  bool holding_ = false;
  size_t fusion_threshold_;                       // rank 0 decides fusion; autotune may change it
  std::atomic<int64_t> max_sleep_us_;             // longest idle sleep (KOLO_CYCLE_TIME)
  std::unique_ptr<Autotuner> tuner_;              // rank 0 with KOLO_AUTOTUNE=1
  std::optional<AutotuneParams> pending_params_;  // rank 0: to carry on the next list
  std::chrono::steady_clock::time_point last_record_;
  std::ofstream autotune_log_;

  // The fast path; coordinator thread only.
  struct FastHeld {
    Request request;
    uint32_t id = 0;  // response-cache id, valid while fast_ids_lists_ == lists_started_
    std::chrono::steady_clock::time_point since;
    uint32_t slot = 0;  // the name's queue slot (TensorQueue::take_slots)
  };
  std::unique_ptr<FastBoard> board_;  // null: no fast path here
  std::vector<FastHeld> fast_;        // this rank's requests held for the board
  uint64_t lists_started_ = 0;        // response lists this rank has begun to execute
  uint64_t fast_ids_lists_ = 0;       // lists_started_ when fast_'s ids were last looked up
  uint64_t fast_published_lists_ = ~uint64_t{0};  // lists_started_ at the last publish
  bool fast_dirty_ = false;           // fast_ grew since the last publish
  bool fast_paused_ = false;          // a join is in progress: everything goes to rank 0
  bool fast_skipped_ = false;         // the last pass ended after a round (fast_early)
  std::set<std::string> fast_demoted_;  // names that go to rank 0 until they next execute
  std::vector<std::string> fast_demote_out_;  // rank 0: names to demote in the next list
  bool fast_pause_out_ = false;               // rank 0: pause everyone in the next list
  RequestList fast_to_root_;                  // a worker's demoted requests, to send
  std::chrono::steady_clock::time_point round_opened_, last_age_scan_;
  bool round_warned_ = false;  // the open round's slow peer was reported (once per round)
  std::chrono::steady_clock::duration fast_max_hold_;  // held longer: demoted (stall inspector)
  std::vector<uint32_t> fast_ids_, fast_agreed_;       // scratch
  std::vector<FastHeld> fast_run_;                      // scratch: a round's tensors
  std::vector<FastHeld> fast_spare_;  // executed ones, whose buffers fast_hold reuses
  std::vector<Response> fast_plan_;   // scratch: a common round's plan (plan_uniform_allreduces)
  std::vector<uint32_t> fast_slots_, fast_hints_;       // scratch: one collective's
  // By queue slot: the cache id its name had last (a hint: a recycled slot's is checked).
  std::vector<uint32_t> slot_cache_hint_;
  std::atomic<uint64_t> fast_collectives_{0}, fast_rounds_{0};


  // Written by the coordinator thread, read by stats() from any thread.
  std::atomic<uint64_t> active_cycles_{0}, collectives_{0}, tensors_{0};
  std::atomic<uint64_t> peer_requests_cached_{0}, peer_requests_full_{0};
  std::atomic<uint64_t> peer_set_requests_cached_{0}, peer_set_requests_full_{0};
  std::atomic<int64_t> coordination_ns_{0}, execution_ns_{0}, rendezvous_ns_{0};

  // Waiters helping (core/wait_help.h).
  bool helps_ = false;               // constant after construction
  std::mutex engine_mu_;             // held for every pass, by the loop or a helper
  std::atomic<int> helpers_{0};      // threads inside help(): the loop naps meanwhile
  int64_t defer_since_ns_ = 0;       // loop thread: when defer_burst began deferring (0: not)
  std::atomic<uint64_t> helped_passes_{0};  // passes with activity run inside help()
  // The last pass with activity ran inside help() and its helper left nothing pending:
  // waiters carry the work, so the idle loop sleeps (woken by a push no waiter takes)
  // instead of spinning beside them.
  std::atomic<bool> helped_last_{false};
  std::atomic<int64_t> last_activity_ns_{0};  // steady clock of the last pass with activity
  // Under engine_mu_: the clock at the current pass's start and at the last pass's end (pass()).
  std::chrono::steady_clock::time_point pass_start_{}, pass_end_{};
  // The longest recent pass with activity, halved for every second since it ran (written
  // under engine_mu_, read by helpers with a deadline): what a bounded helper must leave.
  std::atomic<int64_t> long_pass_ns_{0}, long_pass_at_ns_{0};
  void note_pass(int64_t now_ns, int64_t took_ns);
  std::chrono::nanoseconds expected_pass(int64_t now_ns) const;
  std::mutex nap_mu_;                // the loop's nap while helpers run
  std::condition_variable nap_cv_;
  bool nap_wake_ = false;            // guarded by nap_mu_

  std::atomic<bool> shutdown_requested_{false};
  std::mutex reason_mu_;
  std::string shutdown_reason_;  // guarded by reason_mu_
  std::string take_reason();
  std::atomic<bool> running_{false};
  std::thread thread_;
};

}  // namespace kolo

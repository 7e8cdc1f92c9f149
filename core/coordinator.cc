// The coordinator loop (see core/coordinator.h and docs/runtime.md for the protocol). A
// waiting thread's share of it (help()): core/coordinator_help.cc; what the loop does when
// idle: core/idle_policy.h.
#include "core/coordinator.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <thread>

#include "core/burst_hold.h"
#include "core/fusion.h"
#include "core/join.h"
#include "core/liveness.h"
#include "core/logging.h"
#include "core/wait_help.h"
#include "kernels/cpu_reduce.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;

// Bound on every wait during shutdown.
constexpr auto kShutdownBound = std::chrono::seconds(10);

// " [at a.cc:1 < b.cc:2]": the way an error travelled up (Status::where), for a log line.
std::string where(const Status& s) { return s.where().empty() ? std::string() : " [at " + s.where() + "]"; }

// The fast path's board: on one host with the response cache (null: no fast path).
void* board_memory(const Config& config, Backend& backend, const Topology& topo) {
  if (!config.fast_path || topo.size <= 1 || config.cache_capacity == 0) return nullptr;
  return backend.fast_board_memory();
}

}  // namespace

Coordinator::Coordinator(const Config& config, Backend& backend, TensorQueue& queue, Timeline* timeline,
                         ProcessSetRegistry* sets)
    : config_(config),
      backend_(backend),
      queue_(queue),
      topo_(backend.topology()),
      timeline_(topo_.rank == 0 ? timeline : nullptr),
      table_(topo_.size),
      cache_(config.cache_capacity),
      sets_(sets, backend, topo_.rank, config.cache_capacity, table_),
      tuning_(config, topo_.rank),
      fast_(board_memory(config, backend, topo_), topo_, config, cache_,
            [this](const Request& q, Clock::time_point now) { demote_to_table(q, now); }),
      idle_(config, queue, fast_, topo_.size, topo_.local_size, fast_.on() && config.wait_helps) {
  table_.set_horovod_join(config.join_horovod);
  if (timeline_)  // the executors look at timeline_->enabled() themselves
    for (Executor* e : backend_.executors()) e->set_timeline(timeline_);
}

void Coordinator::apply_params(const ResponseList& list) {
  if (!tuning_.apply(list)) return;
  idle_.set_max_sleep(microseconds(std::max<int64_t>(1, static_cast<int64_t>(list.cycle_time_ms * 1000.0))));
  for (Executor* e : backend_.executors()) e->set_cpu_chunk_bytes(static_cast<size_t>(list.cpu_chunk_bytes));
}

Status Coordinator::add_request(const Request& q, int rank, Clock::time_point now) {
  MessageTable* table = sets_.table_for(q.process_set);
  if (table == nullptr) {
    sets_.add_orphan(q, rank);
    return Status::ok();
  }
  bool first = false;
  KOLO_RETURN_IF_ERROR(table->add(q, rank, now, &first));
  if (timeline_on()) {
    if (first) timeline_->begin(q.name, "NEGOTIATE");
    timeline_->mark(q.name, "rank " + std::to_string(rank) + " ready");
  }
  if (sets_.any_tables() && q.group.empty()) sets_.fail_cross_set(q);
  return Status::ok();
}

Coordinator::~Coordinator() { join(); }

void Coordinator::start() {
  running_ = true;
  last_stall_check_ = Clock::now();
  thread_ = std::thread([this] { loop(); });
  if (idle_.helps()) detail::attach_wait_helper(this);
}

namespace {
std::atomic<int> g_pending_signal{0};
}

void Coordinator::note_signal(int signo) { g_pending_signal.store(signo); }

void Coordinator::request_shutdown(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(reason_mu_);
    if (shutdown_reason_.empty()) shutdown_reason_ = reason;
  }
  shutdown_requested_ = true;
  queue_.notify();
  if (idle_.helps()) idle_.wake_nap();
}

std::string Coordinator::take_reason() {
  std::lock_guard<std::mutex> lock(reason_mu_);
  return shutdown_reason_;
}

void Coordinator::join() {
  if (thread_.joinable()) thread_.join();
  if (idle_.helps()) detail::detach_wait_helper();
}

void Coordinator::stop(const Status& reason) {
  fast_.leave();
  queue_.close(reason);
  running_ = false;
}

Status Coordinator::announce_stop(const Status& why) {
  Liveness* l = topo_.size > 1 ? backend_.liveness() : nullptr;
  if (l == nullptr) return why;
  // A transport error may be the first sign of a peer that died on another host, which only
  // its heartbeats' silence shows: give them their timeout (and a beat) to say so first.
  if (why.code() == Status::Code::kCommunication) {
    const auto until = Clock::now() + l->timeout() + std::chrono::seconds(1);
    while (Clock::now() < until) {
      if (Status d = l->check_now("the coordinator handled a transport error"); !d.is_ok()) return d;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return l->announce_stop(Status::aborted("its coordinator failed: " + why.to_string()));
}

Status Coordinator::test_fault(const Request& q) const {
  if (config_.test_fault_rank != topo_.rank || q.name != "kolo.test.fault") return Status::ok();
  return Status::internal("injected fault (KOLO_TEST_FAULT_RANK=" + std::to_string(topo_.rank) + ") at \"" + q.name +
                          "\"");
}

bool Coordinator::pass(bool* activity) {
  if (int sig = g_pending_signal.load(); sig != 0 && !shutdown_requested_)
    request_shutdown("rank " + std::to_string(topo_.rank) + " received signal " + std::to_string(sig) + " (" +
                     strsignal(sig) + ")");
  // Two clock readings a pass: its start (the cycles' `now`) and its end (the peer check,
  // the counters, and the helper's spin window: pass_end_).
  const auto cycle_start = Clock::now();
  pass_start_ = cycle_start;
  const int64_t exec_before =
      execution_ns_.load(std::memory_order_relaxed) + rendezvous_ns_.load(std::memory_order_relaxed);
  Status s = topo_.rank == 0 ? root_cycle(activity) : worker_cycle(activity);
  if (!s.is_ok()) {
    // A transport error may be a dead peer's doing: if so, say that instead.
    if (Status d = peer_check(true, "the coordinator handled a transport error"); !d.is_ok()) s = d;
    else s = announce_stop(s);
    KOLO_LOG(LogLevel::kError, "coordinator stopped: " << s.message() << where(s));
    stop(s);
    return false;
  }
  if (!running_) return false;
  const auto now = Clock::now();
  pass_end_ = now;
  if (Status d = peer_check(false, topo_.rank == 0 ? "waiting for requests" : "waiting for rank 0's next list", now);
      !d.is_ok()) {
    stop(shutdown_instead(d));
    return false;
  }
  if (*activity) {
    active_cycles_.fetch_add(1, std::memory_order_relaxed);
    // Time of this pass outside the executors (each counter only grows, so a reader
    // between two passes never sees execution ahead of coordination).
    const int64_t cycle_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - cycle_start).count();
    const int64_t exec_after =
        execution_ns_.load(std::memory_order_relaxed) + rendezvous_ns_.load(std::memory_order_relaxed);
    coordination_ns_.fetch_add(cycle_ns - (exec_after - exec_before), std::memory_order_relaxed);
    idle_.note_activity(now, std::chrono::nanoseconds(cycle_ns));
  }
  return true;
}

void Coordinator::loop() {
  while (running_) {
    if (idle_.nap_for_helpers()) continue;
    std::unique_lock<std::mutex> lock(idle_.engine(), std::try_to_lock);
    if (!lock.owns_lock()) continue;  // a helper is inside a pass: it counted itself in first
    bool activity = false;
    if (!pass(&activity)) break;
    lock.unlock();
    if (activity) {
      idle_.note_loop_activity();
      continue;
    }
    idle_.idle_wait();
  }
  // A signal kolo intercepted ends the process as the signal would have, now that every
  // peer has been told why.
  if (int sig = g_pending_signal.load(); sig != 0) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

Status Coordinator::root_cycle(bool* activity) {
  // One clock reading per batch (the pass's): the stall inspector needs no finer resolution.
  auto now = pass_start_;
  const bool my_join = queue_.take_join();  // before the requests pushed ahead of it
  const size_t mine = queue_.take_requests(&requests_, &request_slots_);
  if (my_join) fast_.pause_everyone();  // what it holds goes to the table first
  for (size_t i = 0; i < mine; ++i) {
    Request& q = requests_[i];  // fast_.hold swaps a held one out
    KOLO_RETURN_IF_ERROR(test_fault(q));
    // While a peer owes a request to a failed round of the name (MessageTable::fail_pending),
    // rank 0 sends it through its table, whose entry demotes the name on every rank: the owed
    // request then reaches rank 0 and settles there instead of pairing with this round on
    // the board.
    if (!table_.owes(q.name) && fast_.hold(q, request_slots_[i], now)) continue;
    KOLO_RETURN_IF_ERROR(add_request(q, q.rank, now));
    fast_.note_table(q);
  }
  if (my_join) {
    KOLO_RETURN_IF_ERROR(table_.join(0));
    *activity = true;
  }
  if (mine > 0) {
    *activity = true;
    last_arrival_ = now;
  }
  // An open round first: a lone small tensor's whole collective is there (fast_early).
  bool ran = false;
  KOLO_RETURN_IF_ERROR(fast_early(activity, &ran));
  if (ran) return Status::ok();
  bool shutdown = shutdown_requested_.load();
  std::string reason;
  if (shutdown) {
    reason = take_reason();
    if (reason.empty()) reason = "kolo was shut down by rank 0 while this collective was pending";
  }
  for (;;) {
    int source = -1;
    bool got = false;
    std::vector<uint8_t> bytes;
    KOLO_RETURN_IF_ERROR(backend_.channel().poll_from_peers(&source, &bytes, &got));
    if (!got) break;
    *activity = true;
    RequestList list;
    KOLO_RETURN_IF_ERROR(decode(bytes.data(), bytes.size(), &list));
    now = Clock::now();
    last_arrival_ = now;
    KOLO_RETURN_IF_ERROR(add_peer_list(list, source, now, &shutdown, &reason));
  }
  check_stalls(&shutdown, &reason);
  // While this rank's round is open it must not start a list (a peer may be about to run
  // what the round agrees).
  KOLO_RETURN_IF_ERROR(fast_step(activity, /*offer=*/false));
  if (fast_.open()) {
    size_t in_flight = 0;
    return backend_.channel().progress(&in_flight);
  }

  std::vector<Response> ready;
  if (!hold_burst(shutdown)) {
    Status remembered;
    ready = sets_.take_ready_all(tuning_.fusion_threshold(), cache_.enabled(), &remembered);
    KOLO_RETURN_IF_ERROR(remembered);
  }
  if (timeline_on() && !ready.empty()) {
    for (const Response& r : ready)
      for (const std::string& n : r.names) {
        timeline_->end(n);
        timeline_->begin(n, "QUEUE");
      }
    timeline_->cycle_mark();
  }
  // Every rank has joined: the names still pending are complete (taken above, as nothing is
  // held then), and this list ends everyone's join().
  const bool join_done = table_.all_joined();
  if (!ready.empty() || shutdown || tuning_.has_news() || join_done || fast_.has_news()) {
    ResponseList list;
    list.responses = std::move(ready);
    fast_.put_news(&list);
    if (join_done) {
      list.join_done = true;
      list.last_joined = table_.last_joined();
      table_.reset_join();
    }
    list.shutdown = shutdown;
    list.shutdown_reason = reason;
    tuning_.put_news(&list);
    if (topo_.size > 1) KOLO_RETURN_IF_ERROR(backend_.channel().send_to_all(encode(list)));
    KOLO_RETURN_IF_ERROR(execute_list(list));
    apply_params(list);
    if (tuning_.tuning()) tuning_.record(list);
    *activity = true;
    if (shutdown) {
      // Rank 0 runs no board round from here on: leaving now lets a peer stuck in an open
      // round see it (fast_resolve: peer_left), give up the board and read the shutdown list,
      // instead of waiting out the acknowledgements' 10 s bound (then stop()'s leave()).
      fast_.leave();
      root_drain_acks();
      stop(Status::aborted(reason));
      return Status::ok();
    }
  }
  // Now that this pass's lists have run: join a peer's round, or open one.
  KOLO_RETURN_IF_ERROR(fast_step(activity));
  size_t in_flight = 0;
  return backend_.channel().progress(&in_flight);
}

Status Coordinator::peer_check(bool now, const char* during, std::chrono::steady_clock::time_point at) {
  Liveness* l = topo_.size > 1 ? backend_.liveness() : nullptr;
  if (l == nullptr) return Status::ok();
  if (now) return l->check_now(during);
  return at == Clock::time_point{} ? l->check(during) : l->check(during, at);
}

Status Coordinator::shutdown_instead(const Status& dead) {
  // A peer that shut down cleanly exits once it has rank 0's shutdown list, which reached
  // this rank at the same time: if it is here, the job was shut down, nobody died.
  if (topo_.rank == 0) return dead;
  for (int i = 0; i < 16; ++i) {
    std::vector<uint8_t> bytes;
    bool got = false;
    if (!backend_.channel().poll_from_root(&bytes, &got).is_ok() || !got) break;
    ResponseList list;
    if (decode(bytes.data(), bytes.size(), &list).is_ok() && list.shutdown) return Status::aborted(list.shutdown_reason);
  }
  return dead;
}

Status Coordinator::worker_cycle(bool* activity) {
  RequestList out;
  out.join = queue_.take_join();  // before the requests pushed ahead of it
  if (out.join) fast_.pause();    // what it holds travels ahead of the join
  // Requests held for the board and then sent to rank 0 instead go first: they were
  // submitted before the new ones.
  fast_.take_for_root(&out);
  const size_t mine = queue_.take_requests(&requests_, &request_slots_);
  const auto now = pass_start_;  // one reading per batch (the pass's)
  for (size_t i = 0; i < mine; ++i) {
    Request& q = requests_[i];  // fast_.hold swaps a held one out
    KOLO_RETURN_IF_ERROR(test_fault(q));
    if (fast_.hold(q, request_slots_[i], now)) continue;
    sets_.add_for_root(q, cache_, &out);
  }
  if (shutdown_requested_ && !shutdown_sent_) {
    out.shutdown = true;
    out.shutdown_reason = take_reason();
    shutdown_sent_ = true;
  }
  if (!out.requests.empty() || !out.cached.empty() || !out.set_cached.empty() || out.shutdown || out.join) {
    KOLO_RETURN_IF_ERROR(backend_.channel().send_to_root(encode(out)));
    *activity = true;
  }
  // An open round first: while it is open this rank must not start a list (fast_early).
  bool ran = false;
  KOLO_RETURN_IF_ERROR(fast_early(activity, &ran));
  if (ran) {
    size_t sending = 0;
    return backend_.channel().progress(&sending);
  }
  while (!fast_.open()) {
    std::vector<uint8_t> bytes;
    bool got = false;
    KOLO_RETURN_IF_ERROR(backend_.channel().poll_from_root(&bytes, &got));
    if (!got) break;
    *activity = true;
    ResponseList list;
    KOLO_RETURN_IF_ERROR(decode(bytes.data(), bytes.size(), &list));
    KOLO_RETURN_IF_ERROR(execute_list(list));
    apply_params(list);
    if (list.shutdown) {
      RequestList ack;
      ack.shutdown_ack = true;
      KOLO_RETURN_IF_ERROR(backend_.channel().send_to_root(encode(ack)));
      // Deliver what is queued (the ack included) before stopping; bounded.
      const auto deadline = Clock::now() + kShutdownBound;
      size_t in_flight = 1;
      while (in_flight && Clock::now() < deadline) {
        KOLO_RETURN_IF_ERROR(backend_.channel().progress(&in_flight));
        if (in_flight) std::this_thread::sleep_for(microseconds(50));
      }
      stop(Status::aborted(list.shutdown_reason));
      return Status::ok();
    }
  }
  // Now that the lists that arrived have run: join a peer's round, or open one.
  KOLO_RETURN_IF_ERROR(fast_step(activity));
  size_t in_flight = 0;
  return backend_.channel().progress(&in_flight);
}

Status Coordinator::add_peer_list(const RequestList& list, int source, Clock::time_point now, bool* shutdown,
                                  std::string* reason) {
  peer_requests_full_.fetch_add(list.requests.size(), std::memory_order_relaxed);
  peer_requests_cached_.fetch_add(list.cached.size() + list.set_cached.size(), std::memory_order_relaxed);
  peer_set_requests_cached_.fetch_add(list.set_cached.size(), std::memory_order_relaxed);
  peer_set_requests_full_.fetch_add(
      std::count_if(list.requests.begin(), list.requests.end(), [](const Request& q) { return q.process_set != 0; }),
      std::memory_order_relaxed);
  for (const Request& q : list.requests) {
    KOLO_RETURN_IF_ERROR(add_request(q, q.rank, now));
    fast_.note_table(q);
  }
  for (uint32_t id : list.cached) {
    const Request* known = cache_.get(id);
    if (!known || known->kind == OpKind::kAlltoall)  // alltoall travels in full (find_for_root)
      return Status::internal("rank " + std::to_string(source) + " named response-cache entry " +
                              std::to_string(id) + ", which rank 0 does not have");
    KOLO_RETURN_IF_ERROR(add_request(*known, source, now));
    fast_.note_table(*known);
  }
  for (const CachedInSet& c : list.set_cached) {
    const Request* known = sets_.cached(c);
    if (!known)  // or an alltoall, which travels in full (find_for_root)
      return Status::internal("rank " + std::to_string(source) + " named entry " + std::to_string(c.id) +
                              " of process set " + std::to_string(c.process_set) +
                              "'s response cache, which rank 0 does not have");
    KOLO_RETURN_IF_ERROR(add_request(*known, source, now));
  }
  if (list.join) {
    KOLO_RETURN_IF_ERROR(table_.join(source));
    fast_.pause_everyone();
  }
  if (list.shutdown && !*shutdown) {
    *shutdown = true;
    *reason = !list.shutdown_reason.empty()
                  ? list.shutdown_reason
                  : "kolo was shut down by rank " + std::to_string(source) + " while this collective was pending";
  }
  return Status::ok();
}

bool Coordinator::hold_burst(bool shutdown) {
  if (config_.burst_hold_us == 0 || table_.num_ready() == 0 || shutdown || tuning_.has_news() ||
      table_.all_joined()) {
    holding_ = false;
    return false;
  }
  const auto now = Clock::now();
  if (!holding_) hold_start_ = now;
  BurstState s;
  s.ready = table_.num_ready();
  s.ready_bytes = table_.ready_bytes();
  s.incomplete = table_.num_incomplete();
  s.since_last_arrival = now - last_arrival_;
  s.held_for = now - hold_start_;
  BurstHoldOptions o;
  o.gap = std::chrono::microseconds(config_.burst_hold_us);
  o.max_hold = 5 * o.gap;
  o.fusion_threshold_bytes = tuning_.fusion_threshold();
  holding_ = hold_ready(s, o);
  return holding_;
}

void Coordinator::root_drain_acks() {
  // Every peer answers the shutdown list with an ack, after which it sends nothing more;
  // messages before the ack are requests that will never run and are dropped.
  std::vector<bool> acked(topo_.size, false);
  int missing = topo_.size - 1;
  const auto deadline = Clock::now() + kShutdownBound;
  Liveness* liveness = backend_.liveness();
  while (missing > 0 && Clock::now() < deadline) {
    // A peer that died before acknowledging never will; the verdict also keeps finalize()
    // from waiting for it in MPI_Finalize (a rank that shut down first may never have
    // looked at its peers since the death: the KVStore's waits, for one, judge on their own).
    if (liveness != nullptr && !liveness->check("waiting for the peers' shutdown acknowledgements").is_ok()) break;
    int source = -1;
    bool got = false;
    std::vector<uint8_t> bytes;
    size_t in_flight = 0;
    if (!backend_.channel().poll_from_peers(&source, &bytes, &got).is_ok()) break;
    backend_.channel().progress(&in_flight);
    if (!got) {
      std::this_thread::sleep_for(microseconds(50));
      continue;
    }
    RequestList list;
    if (decode(bytes.data(), bytes.size(), &list).is_ok() && list.shutdown_ack && source > 0 &&
        source < topo_.size && !acked[source]) {
      acked[source] = true;
      --missing;
    }
  }
  if (missing > 0) KOLO_LOG(LogLevel::kWarning, missing << " rank(s) did not acknowledge shutdown within 10 s");
  size_t in_flight = 1;
  while (in_flight && Clock::now() < deadline) {
    if (!backend_.channel().progress(&in_flight).is_ok()) break;
    if (in_flight) std::this_thread::sleep_for(microseconds(50));
  }
}

void Coordinator::check_stalls(bool* shutdown, std::string* reason) {
  if (config_.stall_check_seconds <= 0 && config_.stall_shutdown_seconds <= 0) return;
  const auto now = Clock::now();
  if (now - last_stall_check_ < std::chrono::milliseconds(100)) return;
  last_stall_check_ = now;
  double threshold = config_.stall_check_seconds > 0 ? config_.stall_check_seconds : config_.stall_shutdown_seconds;
  if (config_.stall_shutdown_seconds > 0) threshold = std::min(threshold, config_.stall_shutdown_seconds);
  std::vector<std::pair<int32_t, MessageTable::Pending>> stalled;
  for (auto& p : table_.stalled(threshold, now)) stalled.emplace_back(0, std::move(p));
  sets_.stalled(threshold, now, &stalled);
  for (const auto& [set, p] : stalled) {
    std::string msg = std::string(op_kind_name(p.kind)) + " \"" + p.name + "\" was submitted by rank(s) " +
                      join_ranks(p.ready_ranks) + " but not by rank(s) " + join_ranks(p.missing_ranks) + " for " +
                      std::to_string(static_cast<int>(p.waited_seconds)) + " s";
    if (set != 0) msg += " (on " + describe_process_set(set, *sets_.members(set)) + ")";
    if (config_.stall_shutdown_seconds > 0 && p.waited_seconds >= config_.stall_shutdown_seconds) {
      if (!*shutdown) {
        *shutdown = true;
        *reason = "stall: " + msg + " (KOLO_STALL_SHUTDOWN_TIME_SECONDS=" +
                  std::to_string(config_.stall_shutdown_seconds) + ")";
        KOLO_LOG(LogLevel::kError, *reason);
      }
    } else if (config_.stall_check_seconds > 0 && p.waited_seconds >= config_.stall_check_seconds &&
               stall_reported_.insert(std::to_string(set) + "/" + p.name).second) {
      KOLO_LOG(LogLevel::kWarning, "stall: " << msg);
    }
  }
}

Status Coordinator::execute_list(const ResponseList& list) {
  fast_.list_started();  // what this rank's records on the fast path's board say
  const auto& rs = list.responses;
  // The rendezvous is global (every rank): only lists with a global-set collective make it,
  // so that sets of other ranks never wait for each other here; the members of a set meet
  // among themselves before its first response (meet_set).
  const bool collectives = std::any_of(rs.begin(), rs.end(), [](const Response& r) {
    return r.type != Response::Type::kError && r.process_set == 0;
  });
  // The first response's entries are taken before meeting the peers, so that the rendezvous
  // lines the ranks up right before the data moves, not before this rank's bookkeeping
  // (a 1,000-tensor response is 1,000 look-ups).
  Status first_taken = rs.empty() ? Status::ok() : take(rs[0]);
  if (collectives) {
    const auto t0 = Clock::now();
    if (Status met = backend_.rendezvous([this] { return fast_answer_board(); }); !met.is_ok()) {
      // The runtime stops with this error; the entries already taken fail with it too.
      fail_taken(rs[0], first_taken, met);
      return met;
    }
    rendezvous_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(),
                             std::memory_order_relaxed);
  }
  sets_.list_begins();
  for (size_t i = 0; i < rs.size(); ++i) {
    Status taken = i == 0 ? std::move(first_taken) : take(rs[i]);
    if (Status met = meet_set(rs[i]); !met.is_ok()) {
      fail_taken(rs[i], taken, met);
      return met;
    }
    execute_one(rs[i], std::move(taken));
  }
  fast_.after_list(list);  // its demotions and pause; its names may use the board again
  // After the responses: a joined rank's join() returns once the last collectives it took
  // part in are done.
  if (list.join_done) queue_.complete_join(Status::ok(), list.last_joined);
  return Status::ok();
}

void Coordinator::fail_taken(const Response& r, const Status& taken, const Status& why) {
  if (!taken.is_ok() || joined_in(r, topo_.rank)) return;
  queue_.release(entries_);
  for (auto& e : entries_) e.handle->complete(why), e.handle.reset();
}

Status Coordinator::meet_set(const Response& r) {
  if (!sets_.must_meet(r)) return Status::ok();
  const auto t0 = Clock::now();
  Status s = backend_.rendezvous_set(r.process_set, *sets_.members(r.process_set), [this] { return fast_answer_board(); });
  rendezvous_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(),
                           std::memory_order_relaxed);
  return s;
}

Status Coordinator::take(const Response& r) {
  // An error response may name tensors only some ranks submitted (a grouped collective whose
  // ranks disagree on its members, a set rank 0 does not know): each rank fails those it has
  // on that set. Ranks outside a set take nothing for its other responses.
  const bool error = r.type == Response::Type::kError;
  const bool addressed = !error || r.ranks.empty() ||
                         std::binary_search(r.ranks.begin(), r.ranks.end(), static_cast<int32_t>(topo_.rank));
  if ((!error && !sets_.member_of(r)) || !addressed) {
    entries_.clear();
    return Status::ok();
  }
  if (!joined_in(r, topo_.rank))
    return queue_.take_entries(r.names, &entries_, /*skip_missing=*/error, r.process_set);
  stand_in_entries(r, &entries_, &join_scratch_);
  return Status::ok();
}

void Coordinator::execute_one(const Response& r, Status taken, bool remember) {
  std::vector<TensorEntry>& entries = entries_;  // filled by take_entries; elements keep their buffers
  const bool stand_in = joined_in(r, topo_.rank);  // this rank has joined: entries are stand-ins
  Status s = std::move(taken);
  if (!s.is_ok()) {
    KOLO_LOG(LogLevel::kError, s.message());
    return;
  }
  if (r.type != Response::Type::kError && !sets_.member_of(r)) {  // another set's collective
    if (timeline_on())
      for (const auto& n : r.names) timeline_->end(n);  // rank 0 queued it in its timeline
    return;
  }
  if (timeline_on()) {
    static const char* labels[] = {"ALLREDUCE", "BROADCAST", "ALLGATHER", "ERROR", "ALLTOALL", "REDUCESCATTER"};
    for (const auto& n : r.names) {
      timeline_->end(n);
      timeline_->begin(n, labels[static_cast<int>(r.type)]);
    }
  }
  Liveness* live = topo_.size > 1 ? backend_.liveness() : nullptr;
  if (r.type == Response::Type::kError) {
    s = Status::mismatch(r.error);
  } else if (live != nullptr && !live->dead().is_ok()) {
    s = live->dead();  // the rest of a list after a peer died: nothing can complete
  } else {
    // With joined ranks (core/join.h): an average divides by the ranks that contributed (by
    // every rank under Horovod's rules, Config::join_horovod), so the executors sum and the
    // division follows here. A stand-in keeps the response's
    // prescale: every rank must run the same call (the shared-memory kernels apply the
    // calling rank's prescale to every source), and the identity of a sum scales to itself;
    // min/max/product with a prescale and joined ranks are refused in negotiation.
    const Response* run = &r;
    const bool average_joined =
        !r.joined.empty() && r.type == Response::Type::kAllreduce && r.reduce_op == ReduceOp::kAverage;
    if (average_joined) {
      adjusted_ = r;
      adjusted_.reduce_op = ReduceOp::kSum, adjusted_.postscale = 1.0;
      run = &adjusted_;
    }
    const std::vector<Executor*>* executors = &backend_.executors();
    if (r.process_set != 0) {
      s = backend_.set_executors(r.process_set, *sets_.members(r.process_set), &executors);
      if (!s.is_ok()) executors = nullptr;
    }
    static const std::vector<Executor*> kNone;
    Executor* chosen = nullptr;
    for (Executor* e : executors ? *executors : kNone) {
      if (e->accepts(*run)) {
        chosen = e;
        break;
      }
    }
    if (config_.test_stall_seconds > 0)  // test hook (KOLO_TEST_STALL_SECONDS): busy, not waiting
      std::this_thread::sleep_for(std::chrono::duration<double>(config_.test_stall_seconds));
    const auto t0 = Clock::now();
    if (executors != nullptr)
      s = chosen ? chosen->execute(*run, entries)
                 : Status::invalid_argument("\"" + r.names[0] + "\": no executor runs " + device_name(r.device) +
                                            " tensors in this build");
    if (s.is_ok() && average_joined && !stand_in) {
      const int contributors = config_.join_horovod ? topo_.size : topo_.size - static_cast<int>(r.joined.size());
      for (const TensorEntry& e : entries)
        kernels::apply_postscale(e.view.data, static_cast<size_t>(e.view.num_elements()), r.dtype, ReduceOp::kAverage,
                             contributors, r.postscale);
    }
    execution_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(),
                            std::memory_order_relaxed);
    collectives_.fetch_add(1, std::memory_order_relaxed);
    // A collective that failed because a peer died reports the dead peer, not the symptom
    // (a broken shared-memory group, an MPI error).
    if (!s.is_ok() && live != nullptr)
      if (Status d = live->check_now("a collective failed"); !d.is_ok()) s = d;
  }
  tensors_.fetch_add(entries.size(), std::memory_order_relaxed);
  // Every rank executes the same non-error responses in the same order, so remembering them
  // all keeps the caches identical. Whether this rank's execution succeeded is local: a
  // failure on one rank only must not make its cache skip an entry its peers keep (its
  // later ids would name other tensors on rank 0). Error responses carry each rank's own
  // disagreeing request and are never remembered.
  // Responses with joined ranks are not remembered on any rank (a stand-in lacks the shape).
  // Another set's cache: rank 0 remembered the response when it emitted it (take_ready_all).
  if (remember && cache_.enabled() && r.type != Response::Type::kError && r.joined.empty()) {
    ResponseCache* c = r.process_set == 0 ? &cache_ : topo_.rank != 0 ? &sets_.cache(r.process_set) : nullptr;
    if (c != nullptr)
      for (const auto& e : entries) c->remember(e.request, &r.sizes, e.cache_hint);  // r.sizes: an alltoall's matrix
  }
  if (timeline_on())
    for (const auto& n : r.names) timeline_->end(n);
  if (stand_in) {
    for (auto& e : entries) e.handle.reset();  // private: nobody waits on them
    return;
  }
  // Names are freed before the handles complete: a thread woken by its handle may resubmit.
  queue_.release(entries);
  for (auto& e : entries) {
    // A stand-in for a submission this rank refused fails with this rank's own reason.
    if (e.request.refused.empty()) e.handle->complete(s);
    else e.handle->complete(Status::invalid_argument(e.request.refused));
    e.handle.reset();  // the user's handle may be the last owner now
  }
}

}  // namespace kolo

namespace kolo {

RuntimeStats Coordinator::stats() const {
  RuntimeStats st;
  st.active_cycles = active_cycles_.load();
  st.collectives = collectives_.load();
  st.tensors = tensors_.load();
  st.execution_seconds = static_cast<double>(execution_ns_.load()) * 1e-9;
  st.coordination_seconds = static_cast<double>(coordination_ns_.load()) * 1e-9;
  st.rendezvous_seconds = static_cast<double>(rendezvous_ns_.load()) * 1e-9;
  st.cache_capacity = config_.cache_capacity;
  st.peer_requests_cached = peer_requests_cached_.load();
  st.peer_requests_full = peer_requests_full_.load();
  st.peer_set_requests_cached = peer_set_requests_cached_.load();
  st.peer_set_requests_full = peer_set_requests_full_.load();
  st.fast_collectives = fast_.collectives();
  st.fast_rounds = fast_.rounds();
  st.helped_passes = idle_.helped_passes();
  return st;
}

}  // namespace kolo

// The coordinator's fast path: ranks of one host agree on tensors they negotiated before
// through a shared-memory board instead of a round trip to rank 0 (core/fast_board.h;
// the protocol and why it keeps one order on every rank: docs/runtime.md, "The fast path").
#include <algorithm>
#include <cstdint>

#include "core/coordinator.h"
#include "core/fusion.h"
#include "core/logging.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;

// The collectives the board carries: those rank 0 would answer from the request alone
// (allreduce, reducescatter) or from the request and the cached row matrix (alltoall).
bool board_kind(OpKind k) {
  return k == OpKind::kAllreduce || k == OpKind::kReducescatter || k == OpKind::kAlltoall;
}

// A single collective as rank 0's table would answer it; `matrix`: an alltoall's rows.
void board_response(const Request& q, const std::vector<int64_t>& matrix, Response* r) {
  r->type = q.kind == OpKind::kAllreduce       ? Response::Type::kAllreduce
            : q.kind == OpKind::kReducescatter ? Response::Type::kReducescatter
                                               : Response::Type::kAlltoall;
  r->names.assign(1, q.name);
  copy_op_fields(q, r);
  if (q.kind == OpKind::kAlltoall) r->sizes = matrix;
  else r->sizes.assign(1, num_elements(q.shape));
  r->error.clear();
  r->joined.clear();
  r->row_shape.clear();
  r->process_set = 0;  // the board is the global set's (fast_hold)
}

}  // namespace

bool Coordinator::fast_hold(Request& q, uint32_t slot, Clock::time_point now) {
  if (!board_ || fast_paused_ || !board_kind(q.kind) || !q.device.is_cpu() || !q.group.empty() ||
      q.process_set != 0)
    return false;
  if (!fast_demoted_.empty() && fast_demoted_.count(q.name)) return false;
  // An alltoall is held only while this rank's splits equal those it last ran with (the
  // signature); the AND then says every rank's are, so the cached matrix is still right.
  // The slot's hint saves hashing the name again (the queue hashed it at submit).
  if (slot >= slot_cache_hint_.size()) slot_cache_hint_.resize(slot + 1, ResponseCache::kNoHint);
  const auto id = cache_.find(q, slot_cache_hint_[slot]);
  if (!id) return false;
  slot_cache_hint_[slot] = *id;
  const size_t n = static_cast<size_t>(topo_.size);
  if (q.kind == OpKind::kAlltoall && cache_.matrix(*id).size() != n * n) return false;
  if (fast_.empty()) last_age_scan_ = now;
  if (fast_spare_.empty()) {
    fast_.push_back({q, *id, now, slot});
  } else {
    // A buffer from an earlier round: the request is swapped in, not copied, and q (the
    // queue's element, handed back at the next take_requests) keeps that buffer's capacity.
    fast_.push_back(std::move(fast_spare_.back()));
    fast_spare_.pop_back();
    FastHeld& h = fast_.back();
    std::swap(h.request, q);
    h.id = *id, h.since = now, h.slot = slot;
  }
  if (fast_.size() == 1) fast_ids_lists_ = lists_started_;
  fast_dirty_ = true;
  return true;
}

template <typename Pick>
void Coordinator::fast_demote(Pick pick) {
  const auto now = Clock::now();
  std::vector<std::string> to_table;  // rank 0: names now in its table
  size_t kept = 0;
  for (size_t i = 0; i < fast_.size(); ++i) {
    FastHeld& h = fast_[i];
    if (!pick(h)) {
      if (kept != i) fast_[kept] = std::move(h);
      ++kept;
      continue;
    }
    if (topo_.rank == 0) {
      // Into the table like any request of rank 0's (an error here is a fault the table
      // reports on every rank when the name completes).
      if (Status s = add_request(h.request, 0, now); !s.is_ok()) KOLO_LOG(LogLevel::kError, s.message());
      to_table.push_back(h.request.name);
    } else if (auto id = cache_.find_for_root(h.request)) {
      fast_to_root_.cached.push_back(*id);
    } else {
      fast_to_root_.requests.push_back(std::move(h.request));
    }
  }
  fast_.resize(kept);
  // Peers may hold these names on the board: they must send them to rank 0 too.
  for (const std::string& n : to_table)
    if (cache_.has_name(n) && fast_demoted_.insert(n).second) fast_demote_out_.push_back(n);
}

void Coordinator::fast_note_table(const Request& q) {
  // Steady state: a name rank 0 has cached arrives here only when some rank could not use
  // the board for it (another signature, a demotion, a join); any rank that holds it there
  // would wait for that rank forever. So every rank sends it here until it next runs.
  if (!board_ || !board_kind(q.kind) || q.process_set != 0 || !cache_.has_name(q.name)) return;
  if (!fast_demoted_.insert(q.name).second) return;
  fast_demote_out_.push_back(q.name);
  fast_demote([&](const FastHeld& h) { return h.request.name == q.name; });
}

void Coordinator::fast_pause() {
  if (!board_) return;
  fast_paused_ = true;
  fast_demote([](const FastHeld&) { return true; });
}

void Coordinator::fast_after_list(const ResponseList& list) {
  if (!board_) return;
  if (list.join_done) fast_paused_ = false;
  if (list.fast_pause) fast_pause();
  if (list.fast_demote.empty()) return;
  for (const std::string& n : list.fast_demote) fast_demoted_.insert(n);
  fast_demote([&](const FastHeld& h) { return fast_demoted_.count(h.request.name) != 0; });
}

Status Coordinator::fast_publish() {
  if (fast_ids_lists_ != lists_started_) {
    // Lists ran since the ids were looked up (a cache entry may have changed signature):
    // look again, and send what is no longer cached to rank 0.
    fast_demote([&](FastHeld& h) {
      auto id = cache_.find(h.request, h.id);
      if (id) h.id = *id;
      return !id.has_value();
    });
    fast_ids_lists_ = lists_started_;
  }
  fast_ids_.clear();
  for (const FastHeld& h : fast_) fast_ids_.push_back(h.id);
  board_->publish(lists_started_, fast_ids_);
  fast_dirty_ = false;
  fast_published_lists_ = lists_started_;
  round_opened_ = Clock::time_point{};  // read when the round first waits (fast_resolve)
  round_warned_ = false;
  fast_rounds_.fetch_add(1, std::memory_order_relaxed);
  return Status::ok();
}

Status Coordinator::fast_step(bool* activity, bool offer) {
  if (!board_) return Status::ok();
  if (board_->open()) {
    KOLO_RETURN_IF_ERROR(fast_resolve(activity));
    if (!board_ || board_->open()) return Status::ok();
  }
  if (!offer) return Status::ok();
  // The pass's clock reading (pass_start_) is fine enough for a 10 ms scan.
  if (!fast_.empty() && pass_start_ - last_age_scan_ > std::chrono::milliseconds(10)) {
    // Held too long (a peer never submits it): rank 0's table and stall inspector take over.
    const auto now = last_age_scan_ = Clock::now();
    fast_demote([&](const FastHeld& h) { return now - h.since > fast_max_hold_; });
  }
  const bool changed = fast_dirty_ || (!fast_.empty() && fast_published_lists_ != lists_started_);
  if (!board_->peer_ahead() && !changed) return Status::ok();
  *activity = true;
  KOLO_RETURN_IF_ERROR(fast_publish());
  return fast_resolve(activity);
}

Status Coordinator::fast_early(bool* activity, bool* ran) {
  // Offered at once, not after the lists (the loop's order, fast_step): with the lists of
  // the steady state, none, a lone tensor's round opens before this pass polls MPI. Where a
  // list did arrive, the round is void (the list counts differ) and is offered again after
  // it; no round is ever wrong, as any rank may publish at any time (core/fast_board.h).
  const uint64_t before = fast_collectives_.load(std::memory_order_relaxed);
  KOLO_RETURN_IF_ERROR(fast_step(activity, /*offer=*/fast_dirty_));
  // A round that ran ends the pass (its waiter is done), unless the last pass ended so:
  // every other pass at least reaches the lists and the peers' messages.
  *ran = fast_collectives_.load(std::memory_order_relaxed) != before && !fast_skipped_;
  fast_skipped_ = *ran;
  return Status::ok();
}

Status Coordinator::fast_resolve(bool* activity) {
  bool valid = false;
  int late = -1;
  if (!board_->try_resolve(&valid, &fast_agreed_, &late)) {
    // Not activity: the loop backs off as in any wait for peers (poll, yield, sleep), so a
    // rank waiting here never keeps a descheduled peer off the core it needs to answer.
    int who = -1;
    if (board_->peer_left(&who)) {
      // A peer's coordinator stopped (a shutdown list is on its way, or it failed): no
      // round resolves any more. What this rank holds goes to rank 0, which decides.
      KOLO_LOG(LogLevel::kDebug, "fast path: rank " << who << " left; closing the board");
      board_.reset();
      fast_demote([](const FastHeld&) { return true; });
      return Status::ok();
    }
    // A peer that is slow to answer (stopped, descheduled, busy in a long collective of
    // another process set) is waited for, like any live peer: the loop's dead-peer checks
    // end the wait if its process is gone. Failing here after KOLO_PEER_TIMEOUT_SECONDS
    // (before session 8) stopped this coordinator alone, with the peers left waiting on it.
    // The round's age counts from its first wait, not its publish: a round whose peers had
    // all published resolves at once, with no clock reading.
    const auto now = Clock::now();
    if (round_opened_ == Clock::time_point{}) round_opened_ = now;
    if (!round_warned_ && now - round_opened_ > std::chrono::duration<double>(config_.peer_timeout_seconds)) {
      round_warned_ = true;
      KOLO_LOG(LogLevel::kWarning, "fast path: local rank " << late << " has not answered round " << board_->round()
                                   << " of the shared-memory board for " << config_.peer_timeout_seconds
                                   << " s (KOLO_PEER_TIMEOUT_SECONDS); it is alive, so this rank keeps waiting");
    }
    return Status::ok();
  }
  *activity = true;
  if (!valid || fast_agreed_.empty()) return Status::ok();
  return fast_execute(fast_agreed_);
}

Status Coordinator::fast_execute(const std::vector<uint32_t>& agreed) {
  // Every rank runs the agreed ids in ascending order, fused by the same plan: one order
  // on every rank, decided by the ids alone. fast_ sorted by id (a step submits its names
  // in the same order every time, so it usually is already) meets the sorted agreed ids in
  // one pass; most rounds agree on all of it.
  const auto by_id = [](const FastHeld& a, const FastHeld& b) { return a.id < b.id; };
  if (!std::is_sorted(fast_.begin(), fast_.end(), by_id)) std::sort(fast_.begin(), fast_.end(), by_id);
  fast_run_.clear();
  size_t kept = 0, next = 0;
  const bool all = agreed.size() == fast_.size() &&
                   std::equal(agreed.begin(), agreed.end(), fast_.begin(),
                              [](uint32_t id, const FastHeld& h) { return id == h.id; });
  if (all) {
    fast_run_.swap(fast_);  // the whole of it: nothing moves
  } else {
    for (size_t i = 0; i < fast_.size(); ++i) {
      while (next < agreed.size() && agreed[next] < fast_[i].id) ++next;
      if (next < agreed.size() && agreed[next] == fast_[i].id) {
        fast_run_.push_back(std::move(fast_[i]));
      } else {
        if (kept != i) fast_[kept] = std::move(fast_[i]);
        ++kept;
      }
    }
    fast_.resize(kept);
  }
  if (fast_run_.size() != agreed.size())
    return Status::internal("fast path: the board agreed on " + std::to_string(agreed.size()) +
                            " tensors but this rank holds " + std::to_string(fast_run_.size()) + " of them");
  uint64_t bytes = 0;
  const auto held = [this](size_t i) -> const Request& { return fast_run_[i].request; };
  const size_t buffers = plan_uniform_allreduces(fast_run_.size(), held, fusion_threshold_, &fast_plan_);
  if (buffers > 0) {
    // The common round: fast_run_'s order is the plan's, so each buffer's entries are taken
    // by slot without comparing names.
    size_t first = 0;
    for (size_t b = 0; b < buffers; ++b) {
      const Response& r = fast_plan_[b];
      fast_slots_.clear();
      fast_hints_.clear();
      for (size_t k = first; k < first + r.names.size(); ++k)
        fast_slots_.push_back(fast_run_[k].slot), fast_hints_.push_back(fast_run_[k].id);
      first += r.names.size();
      if (timeline_on())
        for (const std::string& name : r.names) timeline_->begin(name, "BOARD");
      execute_one(r, queue_.take_slots(fast_slots_, fast_hints_, &entries_), /*remember=*/false);
      fast_collectives_.fetch_add(1, std::memory_order_relaxed);
      bytes += response_bytes(r);
    }
  } else {
    FusionPlanner planner(fusion_threshold_);
    Response one;
    for (const FastHeld& h : fast_run_) {
      board_response(h.request, cache_.matrix(h.id), &one);
      planner.add(one);
    }
    next = 0;  // fast_run_[next]: the next name while the plan keeps the ids' order
    for (const Response& r : planner.take()) {
      // Rank 0's timeline: the phase execute_one closes (rank 0's table opens NEGOTIATE and
      // QUEUE for what it negotiates; the board's tensors were agreed on in a round).
      if (timeline_on())
        for (const std::string& n : r.names) timeline_->begin(n, "BOARD");
      execute_one(r, take_held(r, &next), /*remember=*/false);
      fast_collectives_.fetch_add(1, std::memory_order_relaxed);
      if (r.type == Response::Type::kAllreduce) bytes += response_bytes(r);  // as tune_after counts
    }
  }
  // The held buffers are kept for fast_hold's next requests (their strings and shapes keep
  // their capacity).
  for (FastHeld& h : fast_run_) fast_spare_.push_back(std::move(h));
  fast_run_.clear();
  // Rank 0's autotuner scores rounds as it scores lists; new settings travel on a list.
  if (tuner_) tune_record(bytes);
  return Status::ok();
}

Status Coordinator::take_held(const Response& r, size_t* next) {
  // The plan keeps the ids' order unless fusion pulled a tensor forward (mixed dtypes):
  // then the names are looked up, from here on.
  fast_slots_.clear();
  fast_hints_.clear();
  for (size_t k = 0; k < r.names.size() && *next != SIZE_MAX; ++k) {
    const FastHeld* h = *next + k < fast_run_.size() ? &fast_run_[*next + k] : nullptr;
    if (h == nullptr || h->request.name != r.names[k]) *next = SIZE_MAX;
    else fast_slots_.push_back(h->slot), fast_hints_.push_back(h->id);
  }
  if (*next == SIZE_MAX) return take(r);
  *next += r.names.size();
  return queue_.take_slots(fast_slots_, fast_hints_, &entries_);
}

Status Coordinator::fast_answer_board() {
  if (!board_) return Status::ok();
  if (!board_->open()) {
    if (!board_->peer_ahead()) return Status::ok();
    // This rank is inside a list: it offers nothing, so the round agrees on nothing (and its
    // list count tells the others to catch up first).
    board_->publish(lists_started_, {});
    round_opened_ = Clock::now();
    round_warned_ = false;
    fast_published_lists_ = ~uint64_t{0};
  }
  bool activity = false;
  return fast_resolve(&activity);
}

}  // namespace kolo

// One rank's side of the fast path (core/fast_path.h; the protocol and why it keeps one
// order on every rank: docs/runtime.md, "The fast path").
#include "core/fast_path.h"

#include <algorithm>
#include <utility>

#include "core/fusion.h"
#include "core/logging.h"

namespace kolo {
namespace {

using Clock = FastPath::Clock;

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
  r->process_set = 0;  // the board is the global set's (hold)
}

// A tensor held on the board longer than this goes to rank 0, whose stall inspector then
// reports the ranks that never submitted it.
Clock::duration max_hold(const Config& config) {
  double hold_s = 1.0;
  if (config.stall_check_seconds > 0) hold_s = std::min(hold_s, config.stall_check_seconds / 2);
  if (config.stall_shutdown_seconds > 0) hold_s = std::min(hold_s, config.stall_shutdown_seconds / 2);
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(hold_s));
}

}  // namespace

FastPath::FastPath(void* board_memory, const Topology& topo, const Config& config, const ResponseCache& cache,
                   ToTable to_table)
    : topo_(topo),
      peer_timeout_s_(config.peer_timeout_seconds),
      max_hold_(max_hold(config)),
      cache_(cache),
      to_table_(std::move(to_table)) {
  if (board_memory != nullptr)
    board_ = std::make_unique<FastBoard>(board_memory, topo_.local_rank, topo_.size, config.cache_capacity);
}

bool FastPath::hold(Request& q, uint32_t slot, Clock::time_point now) {
  if (!board_ || paused_ || !board_kind(q.kind) || !q.device.is_cpu() || !q.group.empty() || q.process_set != 0)
    return false;
  if (!demoted_.empty() && demoted_.count(q.name)) return false;
  // An alltoall is held only while this rank's splits equal those it last ran with (the
  // signature); the AND then says every rank's are, so the cached matrix is still right.
  // The slot's hint saves hashing the name again (the queue hashed it at submit).
  if (slot >= slot_hint_.size()) slot_hint_.resize(slot + 1, ResponseCache::kNoHint);
  const auto id = cache_.find(q, slot_hint_[slot]);
  if (!id) return false;
  slot_hint_[slot] = *id;
  const size_t n = static_cast<size_t>(topo_.size);
  if (q.kind == OpKind::kAlltoall && cache_.matrix(*id).size() != n * n) return false;
  if (held_.empty()) last_age_scan_ = now;
  if (spare_.empty()) {
    held_.push_back({q, *id, now, slot});
  } else {
    // A buffer from an earlier round: the request is swapped in, not copied, and q (the
    // queue's element, handed back at the next take_requests) keeps that buffer's capacity.
    held_.push_back(std::move(spare_.back()));
    spare_.pop_back();
    Held& h = held_.back();
    std::swap(h.request, q);
    h.id = *id, h.since = now, h.slot = slot;
  }
  if (held_.size() == 1) ids_lists_ = lists_;
  dirty_ = true;
  return true;
}

template <typename Pick>
void FastPath::demote(Pick pick) {
  const auto now = Clock::now();
  std::vector<std::string> to_table;  // rank 0: names now in its table
  size_t kept = 0;
  for (size_t i = 0; i < held_.size(); ++i) {
    Held& h = held_[i];
    if (!pick(h)) {
      if (kept != i) held_[kept] = std::move(h);
      ++kept;
      continue;
    }
    if (topo_.rank == 0) {
      to_table_(h.request, now);
      to_table.push_back(h.request.name);
    } else if (auto id = cache_.find_for_root(h.request)) {
      to_root_.cached.push_back(*id);
    } else {
      to_root_.requests.push_back(std::move(h.request));
    }
  }
  held_.resize(kept);
  // Peers may hold these names on the board: they must send them to rank 0 too.
  for (const std::string& n : to_table)
    if (cache_.has_name(n) && demoted_.insert(n).second) demote_out_.push_back(n);
}

void FastPath::note_table(const Request& q) {
  // Steady state: a name rank 0 has cached arrives here only when some rank could not use
  // the board for it (another signature, a demotion, a join); any rank that holds it there
  // would wait for that rank forever. So every rank sends it here until it next runs.
  if (!board_ || !board_kind(q.kind) || q.process_set != 0 || !cache_.has_name(q.name)) return;
  if (!demoted_.insert(q.name).second) return;
  demote_out_.push_back(q.name);
  demote([&](const Held& h) { return h.request.name == q.name; });
}

void FastPath::pause() {
  if (!board_) return;
  paused_ = true;
  demote([](const Held&) { return true; });
}

void FastPath::put_news(ResponseList* list) {
  list->fast_demote.swap(demote_out_);
  list->fast_pause = pause_out_;
  pause_out_ = false;
}

void FastPath::after_list(const ResponseList& list) {
  if (board_) {
    if (list.join_done) paused_ = false;
    if (list.fast_pause) pause();
    if (!list.fast_demote.empty()) {
      for (const std::string& n : list.fast_demote) demoted_.insert(n);
      demote([&](const Held& h) { return demoted_.count(h.request.name) != 0; });
    }
  }
  // The list's demotions first, then: a name sent to rank 0 instead of the board may use the
  // board again once it has run — also when this list both demotes and runs it (the usual
  // case: rank 0 demotes a name as the request that completes it arrives; nobody can hold
  // a name on the board while it is in flight through the table).
  if (!demoted_.empty())
    for (const Response& r : list.responses)
      for (const std::string& n : r.names) demoted_.erase(n);
}

void FastPath::publish() {
  if (ids_lists_ != lists_) {
    // Lists ran since the ids were looked up (a cache entry may have changed signature):
    // look again, and send what is no longer cached to rank 0.
    demote([&](Held& h) {
      auto id = cache_.find(h.request, h.id);
      if (id) h.id = *id;
      return !id.has_value();
    });
    ids_lists_ = lists_;
  }
  ids_.clear();
  for (const Held& h : held_) ids_.push_back(h.id);
  board_->publish(lists_, ids_);
  dirty_ = false;
  published_lists_ = lists_;
  round_opened_ = Clock::time_point{};  // read when the round first waits (resolve)
  round_warned_ = false;
  rounds_.fetch_add(1, std::memory_order_relaxed);
}

bool FastPath::offer(Clock::time_point pass_start, bool* activity) {
  // The pass's clock reading is fine enough for a 10 ms scan.
  if (!held_.empty() && pass_start - last_age_scan_ > std::chrono::milliseconds(10)) {
    // Held too long (a peer never submits it): rank 0's table and stall inspector take over.
    const auto now = last_age_scan_ = Clock::now();
    demote([&](const Held& h) { return now - h.since > max_hold_; });
  }
  const bool changed = dirty_ || (!held_.empty() && published_lists_ != lists_);
  if (!board_->peer_ahead() && !changed) return false;
  *activity = true;
  publish();
  return true;
}

bool FastPath::answer() {
  if (!board_) return false;
  if (!board_->open()) {
    if (!board_->peer_ahead()) return false;
    // This rank is inside a list: it offers nothing, so the round agrees on nothing (and its
    // list count tells the others to catch up first).
    board_->publish(lists_, {});
    round_opened_ = Clock::now();
    round_warned_ = false;
    published_lists_ = ~uint64_t{0};
  }
  return true;
}

bool FastPath::resolve(bool* activity) {
  bool valid = false;
  int late = -1;
  if (!board_->try_resolve(&valid, &agreed_, &late)) {
    // Not activity: the loop backs off as in any wait for peers (poll, yield, sleep), so a
    // rank waiting here never keeps a descheduled peer off the core it needs to answer.
    int who = -1;
    if (board_->peer_left(&who)) {
      // A peer's coordinator stopped (a shutdown list is on its way, or it failed): no
      // round resolves any more. What this rank holds goes to rank 0, which decides.
      KOLO_LOG(LogLevel::kDebug, "fast path: rank " << who << " left; closing the board");
      board_.reset();
      demote([](const Held&) { return true; });
      return false;
    }
    warn_if_slow(late);
    return false;
  }
  *activity = true;
  return valid && !agreed_.empty();
}

void FastPath::warn_if_slow(int late) {
  // A peer that is slow to answer (stopped, descheduled, busy in a long collective of
  // another process set) is waited for, like any live peer: the loop's dead-peer checks
  // end the wait if its process is gone. Failing here after KOLO_PEER_TIMEOUT_SECONDS
  // (before session 8) stopped this coordinator alone, with the peers left waiting on it.
  // The round's age counts from its first wait, not its publish: a round whose peers had
  // all published resolves at once, with no clock reading.
  const auto now = Clock::now();
  if (round_opened_ == Clock::time_point{}) round_opened_ = now;
  if (!round_warned_ && now - round_opened_ > std::chrono::duration<double>(peer_timeout_s_)) {
    round_warned_ = true;
    KOLO_LOG(LogLevel::kWarning, "fast path: local rank " << late << " has not answered round " << board_->round()
                                 << " of the shared-memory board for " << peer_timeout_s_
                                 << " s (KOLO_PEER_TIMEOUT_SECONDS); it is alive, so this rank keeps waiting");
  }
}

Status FastPath::take_round(size_t fusion_threshold, size_t* collectives) {
  // Every rank runs the agreed ids in ascending order, fused by the same plan: one order
  // on every rank, decided by the ids alone. held_ sorted by id (a step submits its names
  // in the same order every time, so it usually is already) meets the sorted agreed ids in
  // one pass; most rounds agree on all of it.
  const std::vector<uint32_t>& agreed = agreed_;
  const auto by_id = [](const Held& a, const Held& b) { return a.id < b.id; };
  if (!std::is_sorted(held_.begin(), held_.end(), by_id)) std::sort(held_.begin(), held_.end(), by_id);
  run_.clear();
  const bool all = agreed.size() == held_.size() &&
                   std::equal(agreed.begin(), agreed.end(), held_.begin(),
                              [](uint32_t id, const Held& h) { return id == h.id; });
  if (all) {
    run_.swap(held_);  // the whole of it: nothing moves
  } else {
    size_t kept = 0, next = 0;
    for (size_t i = 0; i < held_.size(); ++i) {
      while (next < agreed.size() && agreed[next] < held_[i].id) ++next;
      if (next < agreed.size() && agreed[next] == held_[i].id) {
        run_.push_back(std::move(held_[i]));
      } else {
        if (kept != i) held_[kept] = std::move(held_[i]);
        ++kept;
      }
    }
    held_.resize(kept);
  }
  *collectives = 0;
  if (run_.size() != agreed.size())
    return Status::internal("fast path: the board agreed on " + std::to_string(agreed.size()) +
                            " tensors but this rank holds " + std::to_string(run_.size()) + " of them");
  next_ = 0;
  const auto held = [this](size_t i) -> const Request& { return run_[i].request; };
  // The common round: run_'s order is the plan's, so each buffer's entries are taken by
  // slot without comparing names.
  *collectives = plan_uniform_allreduces(run_.size(), held, fusion_threshold, &uniform_plan_);
  uniform_ = *collectives > 0;
  if (uniform_) {
    plan_ = &uniform_plan_;
    return Status::ok();
  }
  FusionPlanner planner(fusion_threshold);
  Response one;
  for (const Held& h : run_) {
    board_response(h.request, cache_.matrix(h.id), &one);
    planner.add(one);
  }
  mixed_plan_ = planner.take();
  plan_ = &mixed_plan_;
  *collectives = mixed_plan_.size();
  return Status::ok();
}

bool FastPath::slots_for(const Response& r) {
  // The plan keeps the ids' order unless fusion pulled a tensor forward (mixed dtypes):
  // then the names are looked up, from here on.
  slots_.clear();
  hints_.clear();
  for (size_t k = 0; k < r.names.size() && next_ != SIZE_MAX; ++k) {
    const Held* h = next_ + k < run_.size() ? &run_[next_ + k] : nullptr;
    if (h == nullptr || (!uniform_ && h->request.name != r.names[k])) next_ = SIZE_MAX;
    else slots_.push_back(h->slot), hints_.push_back(h->id);
  }
  if (next_ == SIZE_MAX) return false;
  next_ += r.names.size();
  return true;
}

void FastPath::end_round() {
  // The buffers are kept for hold's next requests (their strings and shapes keep their
  // capacity).
  for (Held& h : run_) spare_.push_back(std::move(h));
  run_.clear();
}

}  // namespace kolo

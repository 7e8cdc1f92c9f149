// The coordinator runs the fast path's rounds: when a pass looks at the board, and how the
// collectives a round agreed on are taken from the queue and executed (the fast path's own
// state and decisions: core/fast_path.h; the protocol: docs/runtime.md, "The fast path").
#include "core/coordinator.h"
#include "core/fusion.h"
#include "core/logging.h"

namespace kolo {

void Coordinator::demote_to_table(const Request& q, std::chrono::steady_clock::time_point now) {
  // Into the table like any request of rank 0's (an error here is a fault the table
  // reports on every rank when the name completes).
  if (Status s = add_request(q, 0, now); !s.is_ok()) KOLO_LOG(LogLevel::kError, s.message());
}

Status Coordinator::fast_step(bool* activity, bool offer) {
  if (!fast_.on()) return Status::ok();
  if (fast_.open()) {
    KOLO_RETURN_IF_ERROR(fast_resolve(activity));
    if (fast_.open() || !fast_.on()) return Status::ok();
  }
  if (!offer || !fast_.offer(pass_start_, activity)) return Status::ok();
  return fast_resolve(activity);
}

Status Coordinator::fast_early(bool* activity, bool* ran) {
  // Offered at once, not after the lists (the loop's order, fast_step): with the lists of
  // the steady state, none, a lone tensor's round opens before this pass polls MPI. Where a
  // list did arrive, the round is void (the list counts differ) and is offered again after
  // it; no round is ever wrong, as any rank may publish at any time (core/fast_board.h).
  const uint64_t before = fast_.collectives();
  KOLO_RETURN_IF_ERROR(fast_step(activity, /*offer=*/fast_.dirty()));
  // A round that ran ends the pass (its waiter is done), unless the last pass ended so:
  // every other pass at least reaches the lists and the peers' messages.
  *ran = fast_.ends_pass(before);
  return Status::ok();
}

Status Coordinator::fast_resolve(bool* activity) {
  if (!fast_.resolve(activity)) return Status::ok();
  size_t n = 0;
  KOLO_RETURN_IF_ERROR(fast_.take_round(tuning_.fusion_threshold(), &n));
  uint64_t bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const Response& r = fast_.collective(i);
    // Rank 0's timeline: the phase execute_one closes (rank 0's table opens NEGOTIATE and
    // QUEUE for what it negotiates; the board's tensors were agreed on in a round).
    if (timeline_on())
      for (const std::string& name : r.names) timeline_->begin(name, "BOARD");
    Status taken = fast_.slots_for(r) ? queue_.take_slots(fast_.slots(), fast_.hints(), &entries_) : take(r);
    execute_one(r, std::move(taken), /*remember=*/false);
    fast_.count_collective();
    if (r.type == Response::Type::kAllreduce) bytes += response_bytes(r);  // as Tuning::record counts a list
  }
  fast_.end_round();
  // Rank 0's autotuner scores rounds as it scores lists; new settings travel on a list.
  if (tuning_.tuning()) tuning_.record(bytes);
  return Status::ok();
}

Status Coordinator::fast_answer_board() {
  if (!fast_.answer()) return Status::ok();
  bool activity = false;
  return fast_resolve(&activity);
}

}  // namespace kolo

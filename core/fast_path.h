// core/fast_path.h — one rank's side of the fast path: the requests it holds for the board
// instead of sending them to rank 0, its rounds on the board, and the names that must go
// to rank 0 for now (docs/runtime.md, "The fast path"; the board itself: core/fast_board.h).
//
// The coordinator composes it: a pass hands each new request to hold(); what is not held
// goes to rank 0. offer() publishes what is held when something changed or a peer opened a
// round; resolve() reads the round's verdict; a round that agreed on held tensors is taken
// with take_round(), which plans its collectives (in ascending id order, fused as rank 0's
// lists are) — the coordinator runs each planned collective and calls end_round(). The
// fast path decides, the coordinator executes: nothing here touches the queue or an
// executor, so the rounds are tested on plain memory (test/core/fast_path_test.cc).
//
// Demotions (a held request goes to rank 0 after all: a mismatch, an age limit, a join, a
// peer that left): on rank 0 into the table through `to_table`; on a worker into a request
// list the next pass sends (take_for_root). Rank 0 tells the others which names to demote,
// and when to pause for a join, on its next list (has_news / put_news).
//
// Ownership: borrows the board memory (null: no fast path) and the global set's response
// cache (both outlive this). Thread safety: one thread at a time, the one holding
// the coordinator's engine lock; needs_attention(), collectives() and rounds() from any
// thread (hints and counters).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/config.h"
#include "core/fast_board.h"
#include "core/message.h"
#include "core/response_cache.h"

namespace kolo {

class FastPath {
 public:
  using Clock = std::chrono::steady_clock;
  // Rank 0: puts a request it held into the global set's table, as taken at `now`.
  using ToTable = std::function<void(const Request&, Clock::time_point now)>;

  FastPath(void* board_memory, const Topology& topo, const Config& config, const ResponseCache& cache,
           ToTable to_table);

  bool on() const { return board_ != nullptr; }
  // A round of this rank's is open: it must not start a list until it resolves.
  bool open() const { return board_ && board_->open(); }
  // The board has something for a pass (a round to resolve or join). Cheap; any thread.
  bool needs_attention() const { return board_ && board_->needs_attention(); }
  // This rank runs no more rounds (its coordinator stops).
  void leave() {
    if (board_) board_->leave();
  }

  // Holds `q` (its name in queue slot `slot`, taken from the queue at `now`) for the board
  // if it can go that way (negotiated before, a collective the board carries); else returns
  // false and the caller sends it to rank 0. A held `q` is swapped out: it keeps a spare
  // buffer's contents.
  bool hold(Request& q, uint32_t slot, Clock::time_point now);
  // Rank 0: `q` entered the table; if peers may be holding its name on the board, they
  // must send it here instead (and so must rank 0).
  void note_table(const Request& q);
  // A join began: everything held goes to rank 0, and so does everything new until the
  // join ends. pause_everyone(): rank 0 also tells every rank so on its next list.
  void pause();
  void pause_everyone() {
    pause();
    pause_out_ = on();
  }
  // A worker: the requests demoted since the last call, ahead of the pass's new ones.
  void take_for_root(RequestList* out) {
    out->requests.swap(to_root_.requests);
    out->cached.swap(to_root_.cached);
  }
  // Rank 0: whether its next list must carry demotions or a pause; put_news moves them.
  bool has_news() const { return !demote_out_.empty() || pause_out_; }
  void put_news(ResponseList* list);

  // Rank 0's lists: one begins (the count this rank's records carry), one has run (its
  // demotions and pause, the end of a join, and its names may use the board again).
  void list_started() { ++lists_; }
  void after_list(const ResponseList& list);

  // Whether what is held changed since the last publish (a pass offers it at once).
  bool dirty() const { return dirty_; }
  // REQUIRES: !open(). Demotes what was held too long (scanned every 10 ms by the pass's
  // clock `pass_start`), then publishes a round if something changed or a peer opened one;
  // returns whether it did (the caller then resolves it).
  bool offer(Clock::time_point pass_start, bool* activity);
  // From inside a rendezvous: joins a peer's round with nothing to offer (so no peer waits
  // on this rank while it waits on them); returns whether a round is open to resolve.
  bool answer();
  // REQUIRES: open(). Resolves the round if every rank has published; returns true when it
  // agreed on held tensors: the caller then takes the round. Never blocks.
  bool resolve(bool* activity);
  // Whether this pass ends after the round that just ran (it did run one since
  // `collectives_before` and the last pass did not end so: never two passes in a row).
  bool ends_pass(uint64_t collectives_before) {
    const bool ran = collectives() != collectives_before && !skipped_;
    skipped_ = ran;
    return ran;
  }

  // After resolve() returned true: moves the agreed tensors out of what is held and plans
  // their collectives (fused up to `fusion_threshold` bytes); returns how many. An error if
  // this rank does not hold every agreed id.
  Status take_round(size_t fusion_threshold, size_t* collectives);
  const Response& collective(size_t i) const { return (*plan_)[i]; }
  // Collective i's (in order) queue slots and cache hints, in slots()/hints(); false where
  // the plan left the ids' order (mixed dtypes): then the caller takes its tensors by name.
  bool slots_for(const Response& r);
  const std::vector<uint32_t>& slots() const { return slots_; }
  const std::vector<uint32_t>& hints() const { return hints_; }
  // After each collective the caller ran, and after the round.
  void count_collective() { collectives_.fetch_add(1, std::memory_order_relaxed); }
  void end_round();

  uint64_t collectives() const { return collectives_.load(std::memory_order_relaxed); }
  uint64_t rounds() const { return rounds_.load(std::memory_order_relaxed); }

 private:
  struct Held {
    Request request;
    uint32_t id = 0;  // response-cache id, valid while ids_lists_ == lists_
    Clock::time_point since;
    uint32_t slot = 0;  // the name's queue slot (TensorQueue::take_slots)
  };
  // Sends the held requests for which `pick` is true to rank 0 instead.
  template <typename Pick>
  void demote(Pick pick);
  void publish();
  void warn_if_slow(int late);

  // Constant after construction.
  const Topology topo_;
  const double peer_timeout_s_;
  Clock::duration max_hold_;  // held longer: demoted (rank 0's stall inspector takes over)
  const ResponseCache& cache_;
  const ToTable to_table_;

  std::unique_ptr<FastBoard> board_;  // null: no fast path (or a peer left)
  std::vector<Held> held_;            // this rank's requests held for the board
  uint64_t lists_ = 0;                // rank 0's lists this rank has begun to execute
  uint64_t ids_lists_ = 0;            // lists_ when held_'s ids were last looked up
  uint64_t published_lists_ = ~uint64_t{0};  // lists_ at the last publish
  bool dirty_ = false;                // held_ grew since the last publish
  bool paused_ = false;               // a join is in progress: everything goes to rank 0
  bool skipped_ = false;              // the last pass ended after a round (ends_pass)
  std::set<std::string> demoted_;     // names that go to rank 0 until they next execute
  std::vector<std::string> demote_out_;  // rank 0: names to demote in the next list
  bool pause_out_ = false;               // rank 0: pause everyone in the next list
  RequestList to_root_;                  // a worker's demoted requests, to send
  Clock::time_point round_opened_, last_age_scan_;
  bool round_warned_ = false;  // the open round's slow peer was reported (once per round)
  // By queue slot: the cache id its name had last (a hint: a recycled slot's is checked).
  std::vector<uint32_t> slot_hint_;

  // The round being run and scratch (buffers keep their capacity from round to round).
  std::vector<uint32_t> ids_, agreed_;
  std::vector<Held> run_;    // a round's tensors, in id order
  std::vector<Held> spare_;  // run ones, whose buffers hold() reuses
  std::vector<Response> uniform_plan_, mixed_plan_;
  const std::vector<Response>* plan_ = &uniform_plan_;
  bool uniform_ = false;  // the plan keeps run_'s order: slots_for needs no names
  size_t next_ = 0;       // run_[next_]: the next tensor while the plan keeps the ids' order
  std::vector<uint32_t> slots_, hints_;

  std::atomic<uint64_t> collectives_{0}, rounds_{0};
};

}  // namespace kolo

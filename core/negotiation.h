// core/negotiation.h — rank 0's bookkeeping of which rank submitted which tensor, and the
// decision of what every rank executes. A pure component: requests in, responses out; no
// MPI, no threads, no clock of its own (time is passed in), so it is tested without peers.
//
// A name becomes a Response once every rank has submitted it. If the ranks disagree (kind,
// dtype, reduce op, shape, root, scale factors, device), the Response is an error whose
// message names the tensor, the ranks and the values, e.g.  allreduce "fc1.w": shape [120,400] on ranks 0,2 but [120,401] on rank 1
//
// Thread safety: none; owned and used by the coordinator thread of rank 0.
#pragma once

#include <chrono>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/fusion.h"
#include "core/message.h"
#include "core/response_cache.h"
#include "core/slot_table.h"

namespace kolo {

class MessageTable {
 public:
  using Clock = std::chrono::steady_clock;
  // The table of the global set: ranks 0 .. world_size-1.
  explicit MessageTable(int world_size);
  // The table of a process set (core/process_set.h): `members` are its job ranks, ascending.
  // Requests and messages speak job ranks; the responses' root, allgather sizes and
  // alltoall matrix are indexed by the rank within the set (position in `members`).
  // Its responses carry Response::process_set = `process_set`.
  MessageTable(int32_t process_set, std::vector<int> members);

  // Records one rank's request. Requests from a rank outside the set are rejected.
  // *first (optional) tells whether this was the first request seen for the name.
  Status add(const Request& request, Clock::time_point now = Clock::now(), bool* first = nullptr) {
    return add(request, request.rank, now, first);
  }
  // The same for `request` submitted by `rank` (request.rank is ignored): a response-cache
  // hit is added from the cache's copy without copying it first.
  Status add(const Request& request, int rank, Clock::time_point now, bool* first = nullptr);
  // kolo::join(): `rank` has no more data. Until every rank has joined, it counts as ready
  // for every name it did not submit (the response lists it in Response::joined). A request
  // from a rank that has joined fails its collective on every rank. An error for a rank
  // outside [0, size) or one that joined twice.
  Status join(int rank);
  // Every rank has joined: the caller emits the join completion and calls reset_join().
  bool all_joined() const { return num_joined_ == size_; }
  int last_joined() const { return last_joined_; }
  int num_joined() const { return num_joined_; }
  void reset_join();
  // Horovod's join rules (Config::join_horovod): an allgather or broadcast with joined ranks
  // fails on every rank instead of taking them along.
  void set_horovod_join(bool on) { horovod_join_ = on; }

  // Whether `name` is pending here (submitted by some ranks, not yet complete, not a group
  // member); if so, *job_ranks gets the job ranks that submitted it, and *missing (when
  // given) the job ranks it still waits for (neither submitted nor joined).
  bool pending_ranks(const std::string& name, std::vector<int>* job_ranks, std::vector<int>* missing = nullptr) const;
  // Completes the pending `name` now, before every rank has submitted it, as an error with
  // `message`: the next take_ready returns it addressed to the ranks whose requests were
  // counted (Response::ranks); no other rank touches its own submission of the name. Each
  // job rank in `owed` (members of this set not heard from yet, whose submission of this
  // round is in flight or still to come) settles that round when its request arrives: the
  // request is not counted, and an error with the same message is returned for that rank
  // alone. So every rank's handle of the round fails, and none of their requests is left
  // to pair with the peers' next round of the name (docs/correctness.md, finding 23).
  void fail_pending(const std::string& name, const std::string& message, const std::vector<int>& owed = {});
  // Whether some rank still owes a request for `name` to a round failed by fail_pending.
  bool owes(const std::string& name) const { return !owed_.empty() && owed_.count(name) != 0; }

  // Responses for the names now submitted by every rank, in the order they completed.
  std::vector<Response> take_ready();
  // The same, handed to `planner` one by one (no Response is built per fused tensor).
  // `agreed` (optional): where the request every rank agreed on goes, for each response that
  // is not an error (the first rank's: the others match it in all a response cache compares).
  struct Agreed {
    // A name `cache` holds is remembered there at once: the order of those does not matter
    // (only a new name takes an id).
    ResponseCache* cache;
    // A new name is copied here (unless `cache` is full), for the caller to remember in the
    // order it emits the responses.
    std::vector<Request>* fresh;
  };
  void take_ready(FusionPlanner* planner, const Agreed* agreed = nullptr);

  struct Pending {
    std::string name;
    OpKind kind;
    std::vector<int> missing_ranks;
    std::vector<int> ready_ranks;
    double waited_seconds;
  };
  // Names some but not all ranks have submitted, waiting longer than `min_wait_seconds`.
  std::vector<Pending> stalled(double min_wait_seconds, Clock::time_point now = Clock::now()) const;
  size_t num_pending() const { return slots_.in_use_count(); }
  // Names complete since the last take_ready, their allreduce bytes, and the names some
  // but not all ranks have submitted (what rank 0's burst hold looks at).
  size_t num_ready() const { return completed_.size() + settled_.size(); }
  size_t ready_bytes() const { return ready_bytes_; }
  size_t num_incomplete() const { return slots_.in_use_count() - completed_.size(); }

 private:
  // Per name. The common case — every rank agrees — keeps one Request, not one per rank:
  // only requests that differ from the first are stored (in `odd`), and allgather's first
  // dimensions per rank. Slots are reused by the same name next step (core/slot_table.h),
  // so their vectors and strings keep their capacity.
  struct Slot {
    Request first;
    std::vector<bool> have;  // index = rank
    std::vector<std::pair<int, Request>> odd;
    std::vector<int64_t> first_dims;  // allgather, alltoall: shape[0] by rank
    std::vector<int64_t> matrix;      // alltoall: rows src -> dst, size x size
    std::string splits_error;         // alltoall: the ranks whose splits are unusable
    int count = 0;
    size_t group_run = 0;             // grouped: on the first member released, the run's length
    std::string group_error;          // grouped: on the first member, why the whole group fails
    bool done = false;  // in completed_
    bool early = false;  // failed before every rank submitted it (fail_pending)
    std::string poison;  // non-empty: the collective fails with this message
    std::string refusal;         // the first refusal (Request::refused) received
    std::vector<int> refused_by;  // job ranks that refused it at submission
    Clock::time_point first_seen;
  };
  // A round failed early (fail_pending): the ranks that still owe their request for it,
  // and the message their request fails with.
  struct Owed {
    std::vector<int> ranks;  // job ranks
    std::string message;
  };
  // If `job_rank` owes `q.name` a request, settles it: an error for that rank alone goes to
  // settled_, and the request is not counted. Returns whether it did.
  bool settle_owed(const Request& q, int job_rank);

  // Every rank has submitted or joined.
  bool covered(const Slot& slot) const;
  void mark_if_complete(uint32_t index, Slot& slot);
  // Writes the response for a complete slot into *r (reusing r's buffers).
  void build(const std::string& name, Slot& slot, Response* r) const;
  // The error for ranks that disagree: `reqs` holds every rank's request.
  Response describe(const std::string& name, const std::vector<Request>& reqs, Response r) const;

  // Grouped collectives: the members rank 0 has seen of one group, held back until every
  // rank has submitted all of its members (core/negotiation.cc, docs/collectives.md).
  struct Group {
    std::vector<int32_t> size_by_rank;  // -1: nothing from that rank yet
    std::vector<int32_t> seen_by_rank;  // members received from each rank
    std::vector<uint32_t> members;      // slot indices, first-seen order
  };
  void note_group_member(const Request& q, int rank, uint32_t index, bool fresh_slot);
  void release_group_if_ready(const std::string& group);
  // Records rank's alltoall splits in the slot (or why they are unusable).
  void note_splits(const Request& q, int rank, Slot& slot) const;
  // Takes the run of group members starting at completed_[k] into the planner.
  size_t take_group(size_t k, FusionPlanner* planner, const Agreed* agreed);
  static void note_agreed(const Agreed& agreed, const Request& q, const Response& r);

  // Set position <-> job rank (the identity for the global set).
  int global(int index) const { return members_.empty() ? index : members_[static_cast<size_t>(index)]; }
  int index_of(int rank) const;

  int size_;
  std::vector<int> members_;  // empty for the global set
  int32_t set_id_ = 0;
  SlotTable<Slot> slots_;
  std::unordered_map<std::string, Group> groups_;
  std::vector<uint32_t> completed_;  // slots complete since the last take_ready
  std::unordered_map<std::string, Owed> owed_;  // by name: rounds failed early, still owed
  std::vector<Response> settled_;    // errors for owed requests, for the next take_ready
  size_t ready_bytes_ = 0;           // allreduce bytes of completed_
  std::vector<bool> joined_;         // index = rank: joined and not yet released
  int num_joined_ = 0;
  int last_joined_ = -1;
  bool horovod_join_ = false;
  Response scratch_;                 // reused by take_ready
};

// Describes how the ranks disagree on one attribute: "shape [2,3] on ranks 0,2 but [2,4] on
// rank 1". `values[r]` is rank r's value as text; `labels` (optional) names position r by
// labels[r] instead (a process set's job ranks). Empty when all agree.
std::string describe_disagreement(const char* attribute, const std::vector<std::string>& values,
                                  const std::vector<int>& labels = {});
// "0,2,5"
std::string join_ranks(const std::vector<int>& ranks);

}  // namespace kolo

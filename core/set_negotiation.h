// core/set_negotiation.h — the coordinator's state for process sets other than the global
// one (docs/collectives.md, "Process sets"): each set's members as this rank knows them,
// each set's response cache, and on rank 0 each set's message table, the errors for sets it
// does not know, a name in flight on two sets at once, and the one response list that
// carries every set's collectives.
//
// Why one list for all sets: every rank sees every set's responses in one order, and each
// set's members execute the same subsequence of it, which is what keeps sets that overlap
// in time from deadlocking each other. The global set's table and cache stay with the
// coordinator; this class borrows the table (fail_cross_set and the plan span all sets).
//
// Ownership: borrows the registry (null: the global set only), the backend (a removed set's
// communicators are released through it) and the global table; all outlive this.
// Thread safety: the coordinator's engine lock (one pass at a time); the registry it reads
// is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/message.h"
#include "core/negotiation.h"
#include "core/process_set.h"
#include "core/response_cache.h"

namespace kolo {

class SetNegotiation {
 public:
  SetNegotiation(ProcessSetRegistry* registry, Backend& backend, int rank, size_t cache_capacity,
                 MessageTable& global);

  // Every rank. The job ranks of set `id` as this rank knows them (null: not registered).
  const std::vector<int>* members(int32_t id);
  // Whether this rank executes `r` (it is in r's process set).
  bool member_of(const Response& r);
  // Set `id`'s response cache (not the global set's), made on first use.
  ResponseCache& cache(int32_t id);
  // A worker: puts `q` into `out` by cache id where its set's cache (the global set's:
  // `global`) has it, else in full.
  void add_for_root(const Request& q, const ResponseCache& global, RequestList* out);
  // Per response list: list_begins(), then for each response whether this rank meets the
  // members of its set before it (the first response of a set this rank belongs to).
  void list_begins() { met_.clear(); }
  bool must_meet(const Response& r);

  // Rank 0. The table negotiating set `id` (the global one: id 0), made on first use; null
  // if the set is not registered here.
  MessageTable* table_for(int32_t id);
  // `q`, from job rank `rank`, names a set rank 0 does not know: it fails on that rank
  // alone (Response::ranks), on the next list.
  void add_orphan(const Request& q, int rank);
  // Whether any set other than the global one has a table (fail_cross_set can matter).
  bool any_tables() const { return !tables_.empty(); }
  // After a request for q.name: fails the name on every set of the greatest group of sets
  // holding it pending that wait for each other.
  void fail_cross_set(const Request& q);
  // The request a peer named by (set, cache id); null where rank 0's cache lacks it or it is
  // an alltoall (which travels in full).
  const Request* cached(const CachedInSet& c);
  // Everything negotiated on every set, in one plan (global set first, fused within a set up
  // to `fusion_threshold` bytes); remembers the other sets' new requests in their caches
  // (with `caching`), in list order, as the sets' members will when they execute it (an
  // error there in *status).
  std::vector<Response> take_ready_all(size_t fusion_threshold, bool caching, Status* status);
  // The collectives pending longer than `threshold_s` seconds on the other sets, with their set.
  void stalled(double threshold_s, std::chrono::steady_clock::time_point now,
               std::vector<std::pair<int32_t, MessageTable::Pending>>* out);

 private:
  // After the registry changed: forgets removed sets (tables, members, executors, caches).
  void forget_removed_sets();
  Status remember_emitted(const std::vector<Response>& ready);

  // Constant after construction.
  ProcessSetRegistry* const registry_;
  Backend& backend_;
  const int rank_;
  const size_t cache_capacity_;
  MessageTable& global_;

  std::map<int32_t, std::vector<int>> known_;  // members of the sets this rank has met
  uint64_t version_ = 0;                       // the registry version known_ reflects
  std::map<int32_t, ResponseCache> caches_;    // on rank 0 and the set's members
  std::vector<int32_t> met_;                   // sets met in the list being executed
  std::map<int32_t, std::unique_ptr<MessageTable>> tables_;  // rank 0 only
  std::vector<Response> orphans_;  // rank 0: errors for requests on sets it does not know
  std::vector<Request> agreed_;    // rank 0: scratch of take_ready_all
};

}  // namespace kolo

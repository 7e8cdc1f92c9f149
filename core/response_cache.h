// core/response_cache.h — lets a rank name a collective it submitted before by a small id
// instead of resending its whole request.
//
// Every rank keeps an identical cache: after executing each allreduce, broadcast,
// reducescatter or alltoall (whether or not it succeeded on this rank — a failure on one
// rank alone must not make the caches diverge; error responses, which hold disagreeing
// requests, are never cached), it remembers the request (name and signature: kind, dtype,
// shape, reduce op, root, scales, device kind, splits) in the order the tensors appear in rank 0's response lists,
// which is the same everywhere — so ids agree without any message. A rank whose new request
// matches its cached signature sends only the id; rank 0 rebuilds the request from its own
// copy. Anything else (a new name, a changed shape) travels in full.
// Allgather is never cached: its first dimension differs per rank and nothing can be reused.
// Alltoall is cached for the fast path only (core/fast_board.h): each rank's entry holds its
// own request (its own splits: the signature) and the row matrix of the response that last
// ran under that name, identical on every rank. A rank holds the id on the board only while
// its own splits equal its entry's; when every rank holds it, every row is unchanged, so the
// stored matrix is the one rank 0 would compute. Its requests never travel to rank 0 by id
// (rank 0's entry has rank 0's splits): `find_for_root` says which may.
// One cache per process set: a set's requests are found only in its own cache (`cacheable`),
// which rank 0 and the set's members fill as follows (docs/collectives.md, "Process sets").
// A set's responses are executed by its members only, and rank 0 need not be one; so rank 0
// remembers a set's requests when it *emits* each response list (the agreed request from
// its table, every name of each non-error response of the set: names it holds at once, new
// ones in list order after fusion, as only new names take ids), and every member other than
// rank 0 when it executes the list, in list order. Each member's sequence of new names is
// then rank 0's, so their ids agree; rank 0 emits before anyone executes, so a member never
// names an id rank 0 lacks.
//
// Why ids and not Horovod's per-cycle bit vector: kolo's ranks do not negotiate in lockstep
// cycles (docs/runtime.md), so a collective bitwise AND each cycle would bring the lockstep
// back. An id per submission keeps rank 0 event-driven and still removes the names, shapes
// and validation from the common path.
//
// Capacity: KOLO_CACHE_CAPACITY entries per set (0 = off); once full, new names are not added
// (no eviction: evicting would need every rank to evict the same entry at the same point).
// Thread safety: none; owned by the coordinator thread.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/message.h"

namespace kolo {

class ResponseCache {
 public:
  // The cache of process set `process_set` (0: the global set).
  explicit ResponseCache(size_t capacity, int32_t process_set = 0) : capacity_(capacity), set_(process_set) {}
  bool enabled() const { return capacity_ > 0; }
  size_t size() const { return entries_.size(); }
  bool full() const { return entries_.size() >= capacity_; }  // takes no new names

  // A hint's "none": ids are below the capacity, which is far below this.
  static constexpr uint32_t kNoHint = std::numeric_limits<uint32_t>::max();
  // The id under which `q` (same name and signature) is cached, if any. `hint`: where the
  // caller last found this name; checked (by name, not hash) before the name is looked up,
  // so a stale or wrong hint costs a look-up and never gives a wrong id.
  std::optional<uint32_t> find(const Request& q, uint32_t hint = kNoHint) const;
  // find(), for requests a worker may name to rank 0 by id (not alltoall: see above).
  std::optional<uint32_t> find_for_root(const Request& q) const {
    return q.kind == OpKind::kAlltoall ? std::nullopt : find(q);
  }
  // Whether a request under this name is cached (whatever its signature).
  bool has_name(const std::string& name) const { return ids_.count(name) != 0; }
  // The request cached under `id`, or nullptr for an unknown id.
  const Request* get(uint32_t id) const;
  // Alltoall: the row matrix (Response::sizes) that last ran under `id`; empty otherwise.
  const std::vector<int64_t>& matrix(uint32_t id) const { return matrices_[id]; }
  // Records `q` after its collective executed (failed or not; never for an error response).
  // `matrix`: an alltoall's Response::sizes (required for alltoall, ignored otherwise).
  // Call in response-list order on every rank. `hint` as for find().
  void remember(const Request& q, const std::vector<int64_t>* matrix = nullptr, uint32_t hint = kNoHint);

  // Whether `q` may be cached here: not an allgather, and on this cache's set.
  // A refused submission's stand-in (Request::refused) never matches nor enters a cache.
  bool cacheable(const Request& q) const {
    return q.kind != OpKind::kAllgather && q.process_set == set_ && q.refused.empty();
  }

 private:
  size_t capacity_;
  int32_t set_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<Request> entries_;
  std::vector<std::vector<int64_t>> matrices_;  // by id; alltoall only

  // The id of `name`: `hint` if the entry there is that name's, else a look-up (or end).
  std::optional<uint32_t> id_of(const std::string& name, uint32_t hint) const;
};

}  // namespace kolo

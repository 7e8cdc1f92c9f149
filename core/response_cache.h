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
// Nor are collectives on a process set other than the global one: a set's responses are
// executed by its members only, so rank 0 (a member or not) could not keep the same cache as
// them; their requests always travel in full (docs/collectives.md, "Process sets").
//
// Why ids and not Horovod's per-cycle bit vector: kolo's ranks do not negotiate in lockstep
// cycles (docs/runtime.md), so a collective bitwise AND each cycle would bring the lockstep
// back. An id per submission keeps rank 0 event-driven and still removes the names, shapes
// and validation from the common path.
//
// Capacity: KOLO_CACHE_CAPACITY entries (0 = off); once full, new names are not added.
// Thread safety: none; owned by the coordinator thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/message.h"

namespace kolo {

class ResponseCache {
 public:
  explicit ResponseCache(size_t capacity) : capacity_(capacity) {}
  bool enabled() const { return capacity_ > 0; }
  size_t size() const { return entries_.size(); }

  // The id under which `q` (same name and signature) is cached, if any.
  std::optional<uint32_t> find(const Request& q) const;
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
  // Call in response-list order on every rank.
  void remember(const Request& q, const std::vector<int64_t>* matrix = nullptr);

  static bool cacheable(const Request& q) { return q.kind != OpKind::kAllgather && q.process_set == 0; }

 private:
  size_t capacity_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<Request> entries_;
  std::vector<std::vector<int64_t>> matrices_;  // by id; alltoall only
};

}  // namespace kolo

// core/process_set.h — the registry of process sets (subsets of the job's ranks that run
// collectives among themselves) and the parsing of KOLO_PROCESS_SETS.
//
// Every rank holds the same registry: sets are added and removed collectively (every rank
// calls kolo::add_process_set / remove_process_set with the same arguments, in the same
// order), so ids, handed out in sequence from 1, agree without a message. Id 0 is the
// global set (every rank) and is never stored. An added set is first *reserved* (rank 0's
// coordinator already negotiates for it, because a faster peer may submit to it as soon as
// its own add returns) and becomes *active* (users may submit to it) once every rank agreed
// on its ranks; a set that failed the agreement is erased again.
//
// Thread safety: ProcessSetRegistry is safe from any thread (one internal mutex); user
// threads add and remove, the coordinator thread looks up members. The free functions are
// pure.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo {

// Parses KOLO_PROCESS_SETS: sets separated by ';', ranks by ',', e.g. "0,1;2,3". Spaces
// around numbers are allowed; an empty text is no sets. The error names the variable and the
// offending token. Ranks are checked against the job's size later (check_process_set_ranks).
Status parse_process_sets(const std::string& text, std::vector<std::vector<int>>* out);

// Validates one set's ranks for a job of `world_size`: not empty, each in [0, world_size),
// no repeats. *sorted gets them ascending (a set's rank r is its r-th smallest job rank).
// `what` names the caller in the message ("kolo::add_process_set").
Status check_process_set_ranks(const std::vector<int>& ranks, int world_size, const std::string& what,
                               std::vector<int>* sorted);

// "process set 2 (ranks 0,3)"
std::string describe_process_set(int32_t id, const std::vector<int>& ranks);

class ProcessSetRegistry {
 public:
  // A new set with `sorted_ranks` (checked by the caller), reserved under the next id.
  int32_t reserve(std::vector<int> sorted_ranks);
  // Every rank agreed: users may submit to `id` now.
  void activate(int32_t id);
  // Removes `id` (reserved or active); false if it is not registered.
  bool erase(int32_t id);
  // The ranks of `id` if it is registered (reserved or active); nullopt otherwise. `active`
  // (optional) tells whether users may submit to it.
  std::optional<std::vector<int>> ranks(int32_t id, bool* active = nullptr) const;
  // Active sets by id (the global set not included).
  std::map<int32_t, std::vector<int>> active_sets() const;
  // Bumped by every change; lets the coordinator notice removals cheaply.
  uint64_t version() const;

 private:
  struct Entry {
    std::vector<int> ranks;
    bool active = false;
  };
  mutable std::mutex mu_;
  std::map<int32_t, Entry> sets_;  // guarded by mu_
  int32_t next_id_ = 1;            // guarded by mu_
  uint64_t version_ = 0;           // guarded by mu_
};

}  // namespace kolo

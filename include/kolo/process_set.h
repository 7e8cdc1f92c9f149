// kolo/process_set.h — process sets: collectives among a subset of the job's ranks (as
// Horovod's hvd.ProcessSet).
//
// A process set is a list of job ranks. Collectives on it (the `process_set` argument or
// AllreduceOptions::process_set in kolo/collectives.h) are negotiated, fused and executed
// among its members only; sets whose collectives overlap in time do not wait for each other.
// Within a set, "rank" means the position in its ascending list of job ranks: allgather
// concatenates in that order, alltoall splits are one per member in that order, and
// reducescatter gives the r-th member the r-th part. A broadcast root is a *job* rank, which
// must be a member (as in Horovod).
//
// Sets are registered at start (KOLO_PROCESS_SETS, e.g. "0,1;2,3", ids 1, 2, ... in that
// order) or at run time with add_process_set / remove_process_set. Both are collective over
// the whole job: every rank calls them with the same ranks, in the same order (also the ranks
// outside the set), and they return once every rank agreed. Ranks that pass different lists
// get an Error on every rank and nothing is registered. A rank outside a set that submits a
// collective to it gets an Error on that handle at once, naming the set and the rank.
//
// The global set (id 0, every rank) is ProcessSet{} and is the default everywhere.
// Thread safety: ProcessSet is a value; the functions may be called from any thread, but
// add/remove calls must be made in the same order on every rank (one thread is simplest).
#pragma once

#include <cstdint>
#include <vector>

namespace kolo {

class ProcessSet {
 public:
  // The global set: every rank of the job.
  ProcessSet() = default;
  int32_t id() const { return id_; }
  // The set's job ranks, ascending (every rank for the global set). REQUIRES: kolo::init().
  std::vector<int> ranks() const;
  // This process's rank within the set, or -1 if it is not a member. REQUIRES: kolo::init().
  int rank() const;
  // Number of members. REQUIRES: kolo::init().
  int size() const;
  // Whether this process is a member. REQUIRES: kolo::init().
  bool included() const { return rank() >= 0; }
  bool operator==(const ProcessSet& o) const { return id_ == o.id_; }

 private:
  friend ProcessSet add_process_set(const std::vector<int>& ranks);
  friend std::vector<ProcessSet> process_sets();
  ProcessSet(int32_t id, std::vector<int> ranks) : id_(id), ranks_(std::move(ranks)) {}
  int32_t id_ = 0;
  std::vector<int> ranks_;  // empty for the global set
};

// The global set (the same as ProcessSet{}).
inline ProcessSet global_process_set() { return ProcessSet{}; }

// Registers a set of the job's `ranks` (any order; each in [0, size()), no repeats) and
// returns it. Collective over every rank of the job (see above); throws kolo::Error on every
// rank if the ranks passed differ between ranks, or are not valid.
ProcessSet add_process_set(const std::vector<int>& ranks);

// Unregisters `set`. Collective over every rank of the job. Throws kolo::Error on every rank
// if any rank still has a collective on it in flight (nothing is removed then), or for the
// global set or a set not registered. Afterwards, submitting to it fails at once.
void remove_process_set(const ProcessSet& set);

// The registered sets, the global one first, then by id.
std::vector<ProcessSet> process_sets();

}  // namespace kolo

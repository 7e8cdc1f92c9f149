// ops/mpi_set_comms.h — making a process set's communicators without a wait that a dead
// member could make endless.
//
// A set's communicators (MPI_Comm_create_group over its members, then its per-host and
// cross-host splits) and its shared-memory executor are made by blocking MPI collectives over
// the set's members. A member that dies before its own calls keeps the others inside them
// forever, and no dead-peer check can interrupt a blocking MPI call. The members meet first
// (ops/mpi_backend.cc meet_members: a member already dead is named there); what is left is a
// member dying after the meeting. make_set_comms closes that window: under
// MPI_THREAD_MULTIPLE the blocking calls run on a short-lived helper thread while the calling
// (coordinator) thread polls the dead-peer check and the fast path's board; on a dead peer the
// caller returns the error at once and leaves the helper behind, blocked in MPI (the runtime
// stops on that error and MPI is then not finalized, as on every dead-peer path). The helper
// touches only what SetComms owns, which it shares with the caller, and makes no other call
// than MPI's and the shared-memory set-up's (never the Liveness, which is the coordinator's).
// Why a thread is allowed: docs/collectives.md, "A member that dies while the set is made".
#pragma once

#include <mpi.h>

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "kolo/status.h"
#include "ops/shm/shm_executor.h"

namespace kolo {
class Liveness;
namespace ops {

// What to make: the set `id` of job ranks `members` (sorted), from `parent` (kolo's data
// communicator, over every job rank); `host_id` names this rank's (pretend) host for the
// per-host split; `shm` says whether to try a shared-memory executor, with `shm_options`.
struct SetCommsPlan {
  MPI_Comm parent = MPI_COMM_NULL;
  int32_t id = 0;
  std::vector<int> members;
  int host_id = 0;
  bool shm = false;
  shm::ShmExecutor::Options shm_options;
};

// What was made. `comm`, `local`, `cross` are MPI_COMM_NULL where not made (the caller frees
// the others); `status` is the communicators' (ok, or the failing MPI call); `shm_status` the
// shared-memory executor's (ok with `shm` null when not tried). `done` turns true, with
// release order, once the helper wrote everything else.
struct SetComms {
  MPI_Comm comm = MPI_COMM_NULL, local = MPI_COMM_NULL, cross = MPI_COMM_NULL;
  Topology topo;
  Status status;
  std::unique_ptr<shm::ShmExecutor> shm;
  Status shm_status;
  std::atomic<bool> done{false};
};

// Makes `plan`'s communicators and executor into `*out`. With `liveness` non-null and MPI at
// MPI_THREAD_MULTIPLE, on a helper thread while this thread polls `liveness->check` and
// `while_waiting` (may be empty); the first error they return is returned at once and the
// helper is left behind (`out` stays shared with it). Otherwise on this thread, unbounded
// (documented as such). Returns ok when the helper finished, whatever `out->status` says.
Status make_set_comms(const SetCommsPlan& plan, const std::shared_ptr<SetComms>& out, Liveness* liveness,
                      const std::function<Status()>& while_waiting);

}  // namespace ops
}  // namespace kolo

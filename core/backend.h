// core/backend.h — what the runtime needs from the transport layer, without naming MPI:
// the job's topology, a control channel to/from rank 0 and the ordered executors.
// ops/ provides the MPI implementation (ops/mpi_backend.h).
//
// Thread safety: after creation, used only by the coordinator thread (topology() from any).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/executor.h"
#include "kolo/status.h"

namespace kolo {

class Liveness;

struct Topology {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;
  int cross_rank = 0, cross_size = 1;
};

// Point-to-point control messages between every rank and rank 0. Sends never block (the
// channel keeps the bytes until delivered); receives are polls.
class ControlChannel {
 public:
  virtual ~ControlChannel() = default;
  // Non-root ranks: queue a message to rank 0.
  virtual Status send_to_root(std::vector<uint8_t> message) = 0;
  // Rank 0: queue the same message to every other rank.
  virtual Status send_to_all(std::vector<uint8_t> message) = 0;
  // Rank 0: one message from any peer, if one has arrived (*got=false otherwise).
  virtual Status poll_from_peers(int* source, std::vector<uint8_t>* message, bool* got) = 0;
  // Non-root ranks: one message from rank 0, if one has arrived.
  virtual Status poll_from_root(std::vector<uint8_t>* message, bool* got) = 0;
  // Advances queued sends; returns how many are still in flight.
  virtual Status progress(size_t* in_flight) = 0;
  // Liveness messages (core/liveness.h), fire and forget: a heartbeat (empty `notice`) or
  // a dead-peer notice (its text; the caller keeps `notice` alive until the process ends).
  // poll_heartbeat returns one that has arrived, if any (*got=false otherwise). The MPI
  // channel allows these two from a second thread (MPI_THREAD_MULTIPLE); others need not.
  virtual Status send_heartbeat(int /*peer*/, const std::string& /*notice*/) { return Status::ok(); }
  virtual Status poll_heartbeat(int* /*source*/, std::string* /*notice*/, bool* got) {
    *got = false;
    return Status::ok();
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const Topology& topology() const = 0;
  virtual ControlChannel& channel() = 0;
  // In order of preference; the first that accepts a response executes it.
  virtual const std::vector<Executor*>& executors() = 0;
  // The executors of process set `id` (core/process_set.h), whose job ranks are `members`
  // (ascending, this rank among them), made on first use: the first call is collective over
  // the members, so every member makes it for the same response (the set's first one it
  // executes). *out stays valid until release_set(id) or finalize(). Backends without
  // process sets return an error.
  virtual Status set_executors(int32_t id, const std::vector<int>& members, const std::vector<Executor*>** out) {
    (void)id, (void)members, (void)out;
    return Status::invalid_argument("process sets are not supported by this backend");
  }
  // rendezvous() among the members of process set `id` (made on first use as set_executors
  // does): called by each member before the first response of the set in a response list.
  // `while_waiting` as for rendezvous().
  virtual Status rendezvous_set(int32_t /*id*/, const std::vector<int>& /*members*/,
                                const std::function<Status()>& /*while_waiting*/ = {}) {
    return Status::ok();
  }
  // Frees what set_executors made for `id` (the set was removed; nothing of it is pending).
  virtual void release_set(int32_t /*id*/) {}
  // Returns once every rank has reached the same point (called before executing a response
  // list). Waiting ranks back off from spinning to sleeping, so a rank that is early does not
  // burn a core its own training thread needs while a peer finishes its backward pass —
  // the blocking collectives that follow then start with every rank present.
  // `while_waiting` (may be empty) is called between polls; an error from it ends the wait
  // with that error (the coordinator answers the fast path's board there, so that a peer
  // polling the board is never left waiting on a rank in a rendezvous).
  virtual Status rendezvous(const std::function<Status()>& while_waiting = {}) {
    (void)while_waiting;
    return Status::ok();
  }
  // Zeroed memory that every rank of a one-host job maps, of FastBoard::bytes_needed(size,
  // config.cache_capacity) bytes or more: the fast path's board (core/fast_board.h). Null
  // where there is none (several hosts, one rank, no shared-memory executor, no cache).
  virtual void* fast_board_memory() { return nullptr; }
  // The dead-peer check every wait consults (core/liveness.h); null where there is none.
  virtual Liveness* liveness() { return nullptr; }
  // Which executor runs each collective on CPU (and GPU) tensors, for KOLO_VERBOSE's report:
  // space-separated key=value words, e.g. "allreduce=shm+mpi(hierarchical) broadcast=mpi".
  virtual std::string describe_executors() const { return ""; }
  // Releases the transport (MPI_Finalize if kolo initialised MPI). Called once, from the
  // thread that called init(), after the coordinator has stopped. After a peer was found
  // dead it releases nothing of MPI (MPI_Finalize and MPI_Comm_free may wait for the dead
  // peer) and leaves MPI as it is.
  virtual void finalize() = 0;
};

// How kolo::init() builds the backend (initialising the transport if needed). Chosen above
// core/ (ops/init.cc passes create_mpi_backend, or create_gloo_backend for KOLO_BACKEND=gloo), so
// that core/ names no transport.
using BackendFactory = Status (*)(const Config& config, int* argc, char*** argv, std::unique_ptr<Backend>* out);

}  // namespace kolo

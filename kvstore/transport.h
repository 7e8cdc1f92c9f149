// kvstore/transport.h — how workers and servers of a dist KVStore talk: MPI point-to-point
// messages on the store's own communicator (a duplicate of MPI_COMM_WORLD, so nothing of
// kolo's runtime or the program matches them), a communicator of the workers alone (their
// barrier and metric sums: servers never join those), and bounded waits.
//
// A request is a Header on kTagRequest, followed (when payload_bytes > 0) by its payload on
// kTagRequestData; a reply likewise on kTagReply / kTagReplyData. MPI does not reorder
// messages between one pair of ranks on one tag, so the next payload from a rank belongs to
// the last header received from it.
//
// Every wait polls its request and, between polls, the store's own Liveness (heartbeats on
// this communicator through ops::MpiChannel): a dead rank is an error naming it, on every
// rank (the finder tells the others). A peer that stays alive but silent for longer than
// KOLO_STALL_SHUTDOWN_TIME_SECONDS (when set) is a timeout error. Waiting backs off to short
// sleeps, so an idle server or a waiting worker leaves the CPU to ranks that compute. Once
// kolo::shutdown() has begun on another thread, every wait ends with the shutdown message
// (the store's calls hold the runtime's gate, core/runtime_access.h, which shutdown() waits
// for), and shutdown() stops the heartbeats before it finalizes MPI; a transport destroyed
// after that leaves MPI alone (docs/correctness.md, finding 20).
//
// Ownership: owns its communicators and liveness. Thread safety: one thread.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/liveness.h"
#include "kolo/types.h"
#include "kvstore/sharding.h"
#include "ops/mpi_channel.h"

namespace kolo::kv {

// kCheckState: load_optimizer_states' first phase (the server checks the file, changes nothing).
enum class Op : int32_t { kInit = 1, kPush, kPull, kSetOptimizer, kSaveState, kLoadState, kStop, kCheckState };
const char* op_name(Op op);

enum Tag : int { kTagRequest = 11, kTagRequestData, kTagReply, kTagReplyData };

struct Header {
  Op op = Op::kInit;
  int32_t key = 0;
  int64_t offset = 0;         // first element of the key this message is about
  int64_t size = 0;           // elements from offset
  int64_t total = 0;          // elements of the whole key
  uint64_t seq = 0;           // the worker's request number, echoed in the reply
  int64_t payload_bytes = 0;  // bytes that follow on the data tag
  int32_t failed = 0;         // reply: 1 = the payload is an error message
  int32_t sync = 0;           // request: the store's type is dist_sync
  // init, push, pull and their replies: the values' dtype on the wire (kvstore/wire.h), the key's
  int32_t dtype = static_cast<int32_t>(DType::kFloat32);
};

class Transport {
 public:
  // Collective over MPI_COMM_WORLD. `roles` from KOLO_NUM_SERVERS.
  static Status create(const Config& config, Roles roles, std::unique_ptr<Transport>* out);
  ~Transport();

  const Roles& roles() const { return roles_; }
  int rank() const { return rank_; }
  MPI_Comm comm() const { return comm_; }
  MPI_Comm workers() const { return workers_; }  // MPI_COMM_NULL on servers
  Liveness& liveness() { return *liveness_; }

  // Non-blocking sends of a header and its payload (h.payload_bytes of `payload`). The
  // payload must stay valid until progress() says the sends are done, or be owned by `keep`,
  // which the transport then holds until then.
  Status send(int dest, const Header& h, const void* payload, int tag = kTagRequest, std::shared_ptr<void> keep = {});
  // Tests the sends in flight; *pending = how many remain.
  Status progress(size_t* pending);
  // Waits for all sends in flight.
  Status flush(const char* during);
  // A header waiting on `tag` from anyone, if one has arrived; the dead-peer error once a
  // peer is known dead.
  Status poll(int tag, Header* h, int* source, bool* got);
  // Receives the payload announced by a header from `source` into `buf`.
  Status receive_payload(int source, int tag, void* buf, int64_t bytes, const char* during);
  // Completes `req`, or fails on a dead peer or a stall (see above).
  Status wait(MPI_Request* req, const char* during);
  // Polls liveness and sleeps a little when a loop found nothing to do `idle_polls` times.
  Status idle(int idle_polls, const char* during);
  // After a dead peer: leave MPI's requests and communicators alone (they may wait for it).
  bool peer_dead() const { return !liveness_->dead().is_ok(); }

 private:
  Transport() = default;
  Status dead_error(const Status& dead) const;  // the verdict, with the store's roles
  struct InFlight {
    MPI_Request request;
    std::unique_ptr<Header> header;  // the header's bytes must outlive the send
    std::shared_ptr<void> keep;      // or the payload's
  };
  Roles roles_;
  int rank_ = 0;
  double stall_seconds_ = 0;
  MPI_Comm comm_ = MPI_COMM_NULL, workers_ = MPI_COMM_NULL;
  std::unique_ptr<ops::MpiChannel> channel_;
  std::unique_ptr<Liveness> liveness_;
  std::vector<InFlight> sends_;
  int hook_ = 0;  // core/runtime_access.h: add_before_finalize
};

// "KVStore dist_sync server 1 (rank 5)" / "worker 0 (rank 0)", for messages.
std::string describe_rank(const Roles& roles, int rank);

}  // namespace kolo::kv

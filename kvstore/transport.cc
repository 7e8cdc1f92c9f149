// MPI messages between KVStore workers and servers: kvstore/transport.h.
#include "kvstore/transport.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <cstdio>
#include <thread>

#include "core/host_info.h"
#include "core/runtime_access.h"
#include "ops/mpi_util.h"

namespace kolo::kv {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::kInit: return "init";
    case Op::kPush: return "push";
    case Op::kPull: return "pull";
    case Op::kSetOptimizer: return "set_optimizer";
    case Op::kSaveState: return "save_optimizer_states";
    case Op::kLoadState: return "load_optimizer_states";
    case Op::kStop: return "close";
    case Op::kCheckState: return "load_optimizer_states (check)";
  }
  return "?";
}

std::string describe_rank(const Roles& roles, int rank) {
  if (roles.is_server(rank))
    return "server " + std::to_string(rank - roles.workers) + " (rank " + std::to_string(rank) + ")";
  return "worker " + std::to_string(rank) + " (rank " + std::to_string(rank) + ")";
}

Status Transport::create(const Config& config, Roles roles, std::unique_ptr<Transport>* out) {
  std::unique_ptr<Transport> t(new Transport());
  t->roles_ = roles;
  t->stall_seconds_ = config.stall_shutdown_seconds;
  MPI_Comm_dup(MPI_COMM_WORLD, &t->comm_);
  MPI_Comm_set_errhandler(t->comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(t->comm_, &t->rank_);
  const bool server = roles.is_server(t->rank_);
  KOLO_RETURN_IF_ERROR(ops::mpi_status(
      MPI_Comm_split(t->comm_, server ? MPI_UNDEFINED : 0, t->rank_, &t->workers_), "MPI_Comm_split(workers)"));
  if (t->workers_ != MPI_COMM_NULL) MPI_Comm_set_errhandler(t->workers_, MPI_ERRORS_RETURN);
  // Every rank's pid and host, for the dead-peer check (as kolo's runtime gathers them).
  struct Id {
    int pid;
    char name[64];
  } mine{};
  mine.pid = static_cast<int>(getpid());
  std::snprintf(mine.name, sizeof(mine.name), "%s", host_name().c_str());
  const int size = roles.workers + roles.servers;
  std::vector<Id> all(static_cast<size_t>(size));
  KOLO_RETURN_IF_ERROR(ops::mpi_status(
      MPI_Allgather(&mine, sizeof(Id), MPI_BYTE, all.data(), sizeof(Id), MPI_BYTE, t->comm_), "MPI_Allgather(ids)"));
  std::vector<Liveness::Peer> peers(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    all[r].name[sizeof(all[r].name) - 1] = '\0';
    peers[r].pid = all[r].pid;
    peers[r].host_name = all[r].name;
    peers[r].host = static_cast<int>(r);
    for (size_t q = 0; q < r; ++q)
      if (peers[q].host_name == peers[r].host_name) {
        peers[r].host = peers[q].host;
        break;
      }
  }
  t->channel_ = std::make_unique<ops::MpiChannel>(t->comm_);
  t->liveness_ = std::make_unique<Liveness>(
      t->rank_, std::move(peers), std::chrono::milliseconds(static_cast<int64_t>(config.peer_timeout_seconds * 1000.0)),
      t->channel_.get(), [] {
        int level = 0;
        MPI_Query_thread(&level);
        return level >= MPI_THREAD_MULTIPLE;  // heartbeats on the liveness' own thread
      }());
  Transport* raw = t.get();
  t->hook_ = detail::add_before_finalize([raw] { raw->liveness_->stop(); });
  *out = std::move(t);
  return Status::ok();
}

Transport::~Transport() {
  // Under a lease shutdown() waits for this; refused one, shutdown() has begun (or ended):
  // the heartbeats stop here if it has not stopped them yet, and MPI is left alone.
  std::optional<detail::RuntimeLease> lease;
  try {
    lease.emplace();
  } catch (const Error&) {
  }
  detail::remove_before_finalize(hook_, !lease);
  if (!lease) {
    (void)channel_.release();  // its requests may live on in MPI
    return;
  }
  if (peer_dead()) {
    // MPI may still wait for the dead rank on these: keep everything, the process ends soon.
    if (channel_) channel_->abandon();
    (void)channel_.release();
    for (auto& s : sends_) {
      (void)s.header.release();
      new std::shared_ptr<void>(std::move(s.keep));  // leaked on purpose: MPI may still read it
    }
    return;
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {  // kolo was shut down before the store was destroyed: MPI is gone
    (void)channel_.release();
    return;
  }
  (void)flush("closing the KVStore");
  liveness_.reset();
  channel_.reset();
  if (workers_ != MPI_COMM_NULL) MPI_Comm_free(&workers_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Status Transport::send(int dest, const Header& h, const void* payload, int tag, std::shared_ptr<void> keep) {
  InFlight f;
  f.header = std::make_unique<Header>(h);
  KOLO_RETURN_IF_ERROR(
      ops::mpi_status(MPI_Isend(f.header.get(), sizeof(Header), MPI_BYTE, dest, tag, comm_, &f.request), "MPI_Isend"));
  sends_.push_back(std::move(f));
  if (h.payload_bytes <= 0) return Status::ok();
  if (h.payload_bytes > INT32_MAX)
    return Status::invalid_argument("KVStore: one message of " + std::to_string(h.payload_bytes) +
                                    " bytes is more than MPI's count allows; lower KOLO_KVSTORE_BIGARRAY_BOUND or "
                                    "add servers");
  InFlight d;
  d.keep = std::move(keep);
  KOLO_RETURN_IF_ERROR(ops::mpi_status(MPI_Isend(payload, static_cast<int>(h.payload_bytes), MPI_BYTE, dest, tag + 1,
                                                 comm_, &d.request),
                                       "MPI_Isend"));
  sends_.push_back(std::move(d));
  return Status::ok();
}

Status Transport::progress(size_t* pending) {
  for (size_t i = 0; i < sends_.size();) {
    int done = 0;
    KOLO_RETURN_IF_ERROR(ops::mpi_status(MPI_Test(&sends_[i].request, &done, MPI_STATUS_IGNORE), "MPI_Test(send)"));
    if (done) {
      sends_[i] = std::move(sends_.back());
      sends_.pop_back();
    } else {
      ++i;
    }
  }
  *pending = sends_.size();
  return Status::ok();
}

Status Transport::flush(const char* during) {
  for (int polls = 0;; ++polls) {
    size_t pending = 0;
    KOLO_RETURN_IF_ERROR(progress(&pending));
    if (pending == 0) return Status::ok();
    KOLO_RETURN_IF_ERROR(idle(polls, during));
  }
}

Status Transport::poll(int tag, Header* h, int* source, bool* got) {
  // Once a peer is dead nothing is served or answered any more (the verdict is sticky).
  if (peer_dead()) return dead_error(liveness_->dead());
  int flag = 0;
  MPI_Status st;
  KOLO_RETURN_IF_ERROR(ops::mpi_status(MPI_Iprobe(MPI_ANY_SOURCE, tag, comm_, &flag, &st), "MPI_Iprobe"));
  *got = flag != 0;
  if (!flag) return Status::ok();
  *source = st.MPI_SOURCE;
  return ops::mpi_status(MPI_Recv(h, sizeof(Header), MPI_BYTE, st.MPI_SOURCE, tag, comm_, MPI_STATUS_IGNORE),
                         "MPI_Recv(header)");
}

Status Transport::receive_payload(int source, int tag, void* buf, int64_t bytes, const char* during) {
  MPI_Request req;
  KOLO_RETURN_IF_ERROR(ops::mpi_status(
      MPI_Irecv(buf, static_cast<int>(bytes), MPI_BYTE, source, tag + 1, comm_, &req), "MPI_Irecv(payload)"));
  return wait(&req, during);
}

Status Transport::wait(MPI_Request* req, const char* during) {
  const auto start = Clock::now();
  for (int polls = 0;; ++polls) {
    int done = 0;
    KOLO_RETURN_IF_ERROR(ops::mpi_status(MPI_Test(req, &done, MPI_STATUS_IGNORE), during));
    if (done) return Status::ok();
    if (stall_seconds_ > 0 && (polls & 255) == 0 &&
        std::chrono::duration<double>(Clock::now() - start).count() > stall_seconds_)
      return Status::timeout("KVStore: " + describe_rank(roles_, rank_) + " waited more than " +
                             std::to_string(stall_seconds_) + " s " + during +
                             " (KOLO_STALL_SHUTDOWN_TIME_SECONDS); a peer is alive but does not answer");
    KOLO_RETURN_IF_ERROR(idle(polls, during));
  }
}

Status Transport::dead_error(const Status& s) const {
  // Say which role the dead rank had: the roles of every rank, in the same words everywhere.
  return Status::aborted(s.message() + " [KVStore: workers are ranks 0.." + std::to_string(roles_.workers - 1) +
                         ", servers ranks " + std::to_string(roles_.workers) + ".." +
                         std::to_string(roles_.workers + roles_.servers - 1) + "]");
}

Status Transport::idle(int idle_polls, const char* during) {
  if (Status s = liveness_->check(during); !s.is_ok()) return dead_error(s);
  if (detail::RuntimeLease::closing())
    return Status::aborted("KVStore: " + describe_rank(roles_, rank_) + " stopped " + during + ": " +
                           detail::RuntimeLease::shut_down_status().message());
  // Spin briefly (a reply is often microseconds away), then yield, then sleep: on a machine
  // with more ranks than cores a spinning waiter takes the CPU from the rank it waits for.
  if (idle_polls < 32) return Status::ok();
  if (idle_polls < 64) {
    std::this_thread::yield();
    return Status::ok();
  }
  std::this_thread::sleep_for(std::chrono::microseconds(idle_polls < 1000 ? 20 : 200));
  return Status::ok();
}

}  // namespace kolo::kv

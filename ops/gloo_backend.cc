// The Gloo backend (core/backend.h; KOLO_BACKEND=gloo, docs/gloo.md): no MPI call. The ranks
// meet through a Redis store, under "kolo/<job>/<generation>/", and talk over Gloo's TCP
// transport: one context (a full mesh of TCP pairs) for the control channel, one for the
// collectives and the rendezvous, one per process set.
//
// Made to be re-formed: everything lives in the object (the store connection, the TCP device
// and its thread, the contexts, the liveness threads); finalize() releases all of it, and a
// new backend under another generation shares no store key with the old one. What Gloo gives
// is a CPU executor; the shared-memory executor within a host is not composed in front of it
// yet (it is built over MPI communicators; docs/gloo.md says what is missing).
#include <gloo/allgather.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/context.h>
#include <gloo/rendezvous/redis_store.h>
#include <gloo/transport/tcp/device.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>

#include "ops/gloo_backend.h"
#include "core/heartbeat_socket.h"
#include "core/host_info.h"
#include "core/liveness.h"
#include "core/logging.h"
#include "ops/gloo_channel.h"
#include "ops/gloo_common.h"
#include "ops/gloo_executor.h"

namespace kolo {
namespace {

class GlooBackend final : public Backend {
 public:
  ~GlooBackend() override { finalize(); }

  Status init(const Config& config) {
    if (config.launcher_rank < 0 || config.launcher_size < 1)
      return Status::invalid_argument("the Gloo backend needs this rank's place: KOLO_RANK and KOLO_SIZE, or mpirun's");
    // What this backend does not have is refused, never silently left out (docs/gloo.md).
    if (config.deterministic)
      return Status::invalid_argument("KOLO_DETERMINISTIC=1 is not supported with KOLO_BACKEND=gloo yet "
                                      "(Gloo's ring allreduce adds in ring order); use KOLO_BACKEND=mpi");
    if (config.cpu_operations == CpuOperations::kShm)
      return Status::invalid_argument("KOLO_CPU_OPERATIONS=shm needs KOLO_BACKEND=mpi: the shared-memory executor "
                                      "is not built on the Gloo backend yet (docs/gloo.md)");
    topo_.rank = config.launcher_rank;
    topo_.size = config.launcher_size;
    set_log_context(config.log_level, topo_.rank);
    timeout_ = std::chrono::milliseconds(static_cast<int64_t>(config.gloo_timeout_seconds * 1000.0));
    prefix_ = "kolo/" + config.gloo_job + "/" + std::to_string(config.gloo_generation) + "/";
    if (!config.network_interface.empty()) KOLO_RETURN_IF_ERROR(check_interface(config.network_interface));
    const std::string redis = config.gloo_redis_host + ":" + std::to_string(config.gloo_redis_port);
    KOLO_RETURN_IF_ERROR(ops::gloo_call("connecting to the Redis store at " + redis + " (KOLO_GLOO_REDIS)", [&] {
      store_ = std::make_unique<gloo::rendezvous::RedisStore>(config.gloo_redis_host, config.gloo_redis_port);
    }));
    KOLO_RETURN_IF_ERROR(ops::gloo_call("creating Gloo's TCP device", [&] {
      gloo::transport::tcp::attr attr;
      if (!config.network_interface.empty()) attr.iface = config.network_interface;
      else attr.hostname = host_name();
      device_ = gloo::transport::tcp::CreateDevice(attr);
    }));
    KOLO_RETURN_IF_ERROR(
        ops::connect_gloo_context(*store_, prefix_ + "data", topo_.rank, topo_.size, device_, timeout_, &data_));
    KOLO_RETURN_IF_ERROR(ops::connect_gloo_context(*store_, prefix_ + "control", topo_.rank, topo_.size, device_,
                                                   timeout_, &control_));
    channel_ = std::make_unique<ops::GlooChannel>(control_, timeout_);
    KOLO_RETURN_IF_ERROR(meet_peers(config));
    // Every rank cuts reductions into the same pieces: rank 0's chunk size wins.
    uint64_t chunk = config.cpu_chunk_bytes;
    if (topo_.size > 1)
      KOLO_RETURN_IF_ERROR(ops::gloo_call("gloo::broadcast(chunk size)", [&] {
        gloo::BroadcastOptions opts(data_);
        opts.setOutput(&chunk, 1);
        opts.setRoot(0);
        opts.setTimeout(timeout_);
        gloo::broadcast(opts);
      }));
    if (chunk != config.cpu_chunk_bytes)
      KOLO_LOG(LogLevel::kWarning, "KOLO_CPU_CHUNK_BYTES differs from rank 0's; using rank 0's " << chunk);
    executor_ = std::make_unique<ops::GlooExecutor>(data_, static_cast<size_t>(chunk), timeout_, liveness_.get());
    executors_.push_back(executor_.get());
    return Status::ok();
  }

  const Topology& topology() const override { return topo_; }
  ControlChannel& channel() override { return *channel_; }
  const std::vector<Executor*>& executors() override { return executors_; }
  Liveness* liveness() override { return liveness_.get(); }

  Status rendezvous(const std::function<Status()>& /*while_waiting*/) override {
    // No fast path's board to answer (no shared-memory executor): a plain bounded barrier.
    return barrier(data_, "waiting for peers to start a scheduled collective");
  }

  Status rendezvous_set(int32_t id, const std::vector<int>& members,
                        const std::function<Status()>& /*while_waiting*/) override {
    if (members.size() < 2) return Status::ok();
    const std::vector<Executor*>* unused = nullptr;
    // As the MPI backend: a set whose executors cannot be made fails its collectives, not
    // the runtime, and every member fails alike.
    if (!set_executors(id, members, &unused).is_ok()) return Status::ok();
    return barrier(sets_.at(id).context, "waiting for a process set's members to start a collective");
  }

  std::string describe_executors() const override {
    return "allreduce=gloo broadcast=gloo allgather=gloo alltoall=gloo reducescatter=gloo(allreduce) "
           "shm=off(KOLO_BACKEND=gloo) store=" + prefix_;
  }

  // A process set's executor: a Gloo context of its members, connected through the store
  // under the set's id (collective over the members only, bounded by the timeout).
  Status set_executors(int32_t id, const std::vector<int>& members, const std::vector<Executor*>** out) override {
    if (auto it = sets_.find(id); it != sets_.end()) {
      *out = &it->second.list;
      return Status::ok();
    }
    const auto me = std::find(members.begin(), members.end(), topo_.rank);
    if (me == members.end())
      return Status::internal("process set " + std::to_string(id) + ": rank " + std::to_string(topo_.rank) +
                              " is not a member");
    SetExecutors x;
    const int rank = static_cast<int>(me - members.begin()), size = static_cast<int>(members.size());
    if (size == 1) {
      x.context = std::make_shared<gloo::Context>(0, 1);  // no peer: nothing to connect
    } else {
      Status s = ops::connect_gloo_context(*store_, prefix_ + "set/" + std::to_string(id), rank, size, device_,
                                           timeout_, &x.context);
      if (!s.is_ok()) {
        s = ops::gloo_failure(s, liveness_.get(), "connecting a process set's members");
        if (s.code() == Status::Code::kAborted) return s;  // the dead-peer verdict
        return Status::communication("process set " + std::to_string(id) + ": could not set up its executors: " +
                                     s.message());
      }
    }
    x.executor = std::make_unique<ops::GlooExecutor>(x.context, executor_->chunk_bytes(), timeout_, liveness_.get());
    x.list.push_back(x.executor.get());
    SetExecutors& kept = sets_[id] = std::move(x);
    *out = &kept.list;
    return Status::ok();
  }

  void release_set(int32_t id) override { sets_.erase(id); }

  void finalize() override {
    if (finalized_) return;
    finalized_ = true;
    if (liveness_) liveness_->stop();  // its threads use the channel
    if (channel_) channel_->stop();
    sets_.clear();
    executors_.clear();
    executor_.reset();
    channel_.reset();
    liveness_.reset();
    control_.reset();
    data_.reset();
    device_.reset();
    store_.reset();
  }

 private:
  struct SetExecutors {
    std::shared_ptr<gloo::Context> context;
    std::unique_ptr<ops::GlooExecutor> executor;
    std::vector<Executor*> list;
  };

  Status barrier(const std::shared_ptr<gloo::Context>& context, const char* during) {
    if (context->size == 1) return Status::ok();
    Status s = ops::gloo_call("gloo::barrier", [&] {
      gloo::BarrierOptions opts(context);
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    });
    return ops::gloo_failure(s, liveness_.get(), during);
  }

  // Every rank's pid, host and heartbeat endpoint (an allgather over the data context): the
  // topology (ranks with the same host name share a host, or KOLO_TEST_RANKS_PER_HOST's
  // pretend hosts) and the dead-peer check.
  Status meet_peers(const Config& config) {
    struct Id {
      int32_t pid, unused;
      char name[64];
      HeartbeatSocket::Endpoint udp;
      uint64_t token;  // rank 0's is the job's
    } mine{};
    mine.pid = static_cast<int32_t>(getpid());
    std::snprintf(mine.name, sizeof(mine.name), "%s", host_name().c_str());
    std::unique_ptr<HeartbeatSocket> udp = HeartbeatSocket::open();
    if (udp) mine.udp = udp->local_endpoint(config.network_interface);
    mine.token = random_token();
    std::vector<Id> all(static_cast<size_t>(topo_.size));
    all[static_cast<size_t>(topo_.rank)] = mine;
    if (topo_.size > 1)
      KOLO_RETURN_IF_ERROR(ops::gloo_call("gloo::allgather(ids)", [&] {
        gloo::AllgatherOptions opts(data_);
        opts.setInput(reinterpret_cast<uint8_t*>(&mine), sizeof(Id));
        opts.setOutput(reinterpret_cast<uint8_t*>(all.data()), sizeof(Id) * all.size());
        opts.setTimeout(timeout_);
        gloo::allgather(opts);
      }));
    std::vector<int> host(all.size());
    for (size_t r = 0; r < all.size(); ++r) {
      all[r].name[sizeof(all[r].name) - 1] = '\0';
      const int n = config.ranks_per_host_override;
      host[r] = static_cast<int>(r);  // the first rank of r's host
      if (n > 0) host[r] = static_cast<int>(r) / n * n;
      else
        for (size_t q = 0; q < r; ++q)
          if (std::string(all[q].name) == all[r].name) {
            host[r] = static_cast<int>(q);
            break;
          }
    }
    set_topology(host);
    std::vector<Liveness::Peer> peers(all.size());
    std::vector<HeartbeatSocket::Endpoint> endpoints(all.size());
    for (size_t r = 0; r < all.size(); ++r) {
      peers[r].pid = all[r].pid;
      peers[r].host = host[r];
      peers[r].host_name = all[r].name;
      endpoints[r] = all[r].udp;
    }
    if (udp) udp->set_peers(std::move(endpoints), all[0].token, topo_.rank);
    // The channel's heartbeat calls are safe from any thread: listener threads.
    liveness_ = std::make_unique<Liveness>(
        topo_.rank, std::move(peers),
        std::chrono::milliseconds(static_cast<int64_t>(config.peer_timeout_seconds * 1000.0)), channel_.get(), true,
        std::move(udp));
    return Status::ok();
  }

  // Local rank/size among the ranks of this host; cross rank/size among the ranks with this
  // local rank (as MPI's splits by host, then by local rank, order them).
  void set_topology(const std::vector<int>& host) {
    const int me = topo_.rank;
    std::vector<int> local_rank(host.size(), 0);
    topo_.local_size = 0;
    for (size_t r = 0; r < host.size(); ++r) {
      for (size_t q = 0; q < r; ++q) local_rank[r] += host[q] == host[r] ? 1 : 0;
      if (host[r] == host[static_cast<size_t>(me)]) ++topo_.local_size;
    }
    topo_.local_rank = local_rank[static_cast<size_t>(me)];
    topo_.cross_rank = 0;
    topo_.cross_size = 0;
    for (size_t r = 0; r < host.size(); ++r) {
      if (local_rank[r] != topo_.local_rank) continue;
      if (static_cast<int>(r) < me) ++topo_.cross_rank;
      ++topo_.cross_size;
    }
  }

  Topology topo_;
  bool finalized_ = false;
  std::chrono::milliseconds timeout_{60000};
  std::string prefix_;  // "kolo/<job>/<generation>/": every store key of this backend
  std::unique_ptr<gloo::rendezvous::Store> store_;
  std::shared_ptr<gloo::transport::Device> device_;  // Gloo's TCP device (its own event-loop thread)
  std::shared_ptr<gloo::Context> data_, control_;
  std::unique_ptr<ops::GlooChannel> channel_;
  std::unique_ptr<Liveness> liveness_;  // borrows channel_
  std::unique_ptr<ops::GlooExecutor> executor_;
  std::vector<Executor*> executors_;
  std::map<int32_t, SetExecutors> sets_;
};

}  // namespace

Status create_gloo_backend(const Config& config, std::unique_ptr<Backend>* out) {
  auto b = std::make_unique<GlooBackend>();
  KOLO_RETURN_IF_ERROR(b->init(config));
  *out = std::move(b);
  return Status::ok();
}

}  // namespace kolo

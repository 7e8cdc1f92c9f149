// The MPI backend (core/backend.h): initialises MPI when the program has not, derives the
// topology, and owns kolo's communicators, control channel and CPU executors.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <thread>

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "ops/mpi_backend.h"

#include "core/backend.h"
#include "core/heartbeat_socket.h"
#include "core/host_info.h"
#include "core/liveness.h"
#include "core/logging.h"
#include "ops/mpi_channel.h"
#include "ops/mpi_executor.h"
#include "ops/mpi_set_comms.h"
#include "ops/mpi_util.h"
#include "ops/shm/shm_executor.h"
#ifdef KOLO_HAVE_CUDA
#include "ops/gpu/gpu_executors.h"
#endif

namespace kolo {
namespace {

class MpiBackend final : public Backend {
 public:
  ~MpiBackend() override { finalize(); }

  Status init(const Config& config, int* argc, char*** argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    // KOLO_NETWORK_INTERFACE: refuse a host without it, before any connection is made; it
    // becomes Open MPI's TCP interface (read at MPI_Init, so only if kolo initialises MPI)
    // and NCCL's, unless their own variables are set.
    if (!config.network_interface.empty()) {
      KOLO_RETURN_IF_ERROR(check_interface(config.network_interface));
      setenv("OMPI_MCA_btl_tcp_if_include", config.network_interface.c_str(), 0);
      setenv("NCCL_SOCKET_IFNAME", config.network_interface.c_str(), 0);
    }
    if (!initialized) {
      int provided = 0;
      KOLO_RETURN_IF_ERROR(
          ops::mpi_status(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread"));
      owns_mpi_ = true;
      if (provided < MPI_THREAD_SERIALIZED)
        return Status::communication("MPI provides thread level " + std::to_string(provided) +
                                     "; kolo needs at least MPI_THREAD_SERIALIZED");
    } else if (thread_level() < MPI_THREAD_SERIALIZED) {
      // The program started MPI itself (MPI_Init, or MPI_Init_thread with a low level): kolo's
      // coordinator thread would call MPI from a second thread, which such a level forbids
      // (Open MPI then crashes deep inside a probe). Refuse with what to change instead.
      return Status::invalid_argument(
          "the program initialised MPI with thread level " + std::string(thread_level_name(thread_level())) +
          " (MPI_Init, or MPI_Init_thread asking for less); kolo's coordinator thread calls MPI, so it needs "
          "MPI_THREAD_SERIALIZED or more: call MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) "
          "instead, or let kolo::init start MPI");
    }
    // Own communicators: kolo's traffic never matches the program's own MPI messages.
    MPI_Comm_dup(MPI_COMM_WORLD, &control_);
    MPI_Comm_dup(MPI_COMM_WORLD, &data_);
    MPI_Comm_dup(MPI_COMM_WORLD, &meet_);
    MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(data_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(meet_, MPI_ERRORS_RETURN);
    test_die_in_set_setup_ = config.test_die_in_set_setup;
    MPI_Comm_rank(MPI_COMM_WORLD, &topo_.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &topo_.size);
    // Now, not after init: the executors' set-up logs (why no shm, no arena) must show.
    set_log_context(config.log_level, topo_.rank);
    if (config.ranks_per_host_override > 0) {
      MPI_Comm_split(MPI_COMM_WORLD, topo_.rank / config.ranks_per_host_override, topo_.rank, &local_);
    } else {
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, topo_.rank, MPI_INFO_NULL, &local_);
    }
    MPI_Comm_rank(local_, &topo_.local_rank);
    MPI_Comm_size(local_, &topo_.local_size);
    MPI_Comm_split(MPI_COMM_WORLD, topo_.local_rank, topo_.rank, &cross_);
    MPI_Comm_rank(cross_, &topo_.cross_rank);
    MPI_Comm_size(cross_, &topo_.cross_size);
    ops::create_half_ops();
    channel_ = std::make_unique<ops::MpiChannel>(control_);
    KOLO_RETURN_IF_ERROR(create_liveness(config));
    // Every rank must cut reductions into the same pieces (their element counts meet in one
    // MPI call): rank 0's chunk size wins.
    unsigned long long chunk = config.cpu_chunk_bytes;
    KOLO_RETURN_IF_ERROR(ops::mpi_status(MPI_Bcast(&chunk, 1, MPI_UNSIGNED_LONG_LONG, 0, data_), "MPI_Bcast(chunk)"));
    if (chunk != config.cpu_chunk_bytes)
      KOLO_LOG(LogLevel::kWarning, "KOLO_CPU_CHUNK_BYTES differs from rank 0's; using rank 0's " << chunk);
    // KOLO_DETERMINISTIC decides which algorithm a float sum takes, so every rank must take
    // the same: a rank that asks for it gets it for all (with a warning).
    int det = config.deterministic ? 1 : 0, any_det = 0;
    KOLO_RETURN_IF_ERROR(
        ops::mpi_status(MPI_Allreduce(&det, &any_det, 1, MPI_INT, MPI_MAX, data_), "MPI_Allreduce(deterministic)"));
    if (any_det != det)
      KOLO_LOG(LogLevel::kWarning, "KOLO_DETERMINISTIC=1 on another rank; every rank sums floats in rank order");
    deterministic_ = any_det == 1;
    mpi_executor_ =
        std::make_unique<ops::MpiExecutor>(data_, static_cast<size_t>(chunk), liveness_.get(), deterministic_);
#ifdef KOLO_HAVE_CUDA
    // GPU executors take GPU tensors only; they come first so the MPI executor keeps CPU ones.
    gpu_setup_ =
        ops::gpu::GpuExecutorSetup{data_, local_, cross_, config.gpu_operations, config.hierarchical_allreduce};
    const ops::gpu::GpuExecutorSetup& gpu = gpu_setup_;
    KOLO_RETURN_IF_ERROR(ops::gpu::create_gpu_executors(gpu, topo_, mpi_executor_.get(), &gpu_executors_));
    for (auto& e : gpu_executors_) executors_.push_back(e.get());
#endif
    KOLO_RETURN_IF_ERROR(add_shm_executor(config));
    executors_.push_back(mpi_executor_.get());
    return Status::ok();
  }

  // Shared memory within a host (ops/shm), in front of MPI for CPU tensors. `auto` falls
  // back to MPI when the segment cannot be set up (create() fails on every rank alike, so
  // all ranks agree); `shm` makes that an init() error; `mpi` skips it.
  Status add_shm_executor(const Config& config) {
    cpu_operations_ = config.cpu_operations;
    cross_host_sliced_ = config.cross_host_sliced;
    cross_host_half_wire_ = config.cross_host_half_wire;
    if (config.cpu_operations == CpuOperations::kMpi) return Status::ok();
    shm::ShmExecutor::Options so;
    so.peer_timeout = std::chrono::seconds(60);
    so.arena_bytes = config.shm_arena_bytes;  // kolo/memory.h
    so.arena_auto = config.shm_arena_auto;
    so.result_pool_bytes = config.shm_result_pool_bytes;
    so.liveness = liveness_.get();
    so.fast_board_capacity = config.fast_path ? config.cache_capacity : 0;
    so.sliced_cross_host = config.cross_host_sliced;
    so.half_wire = config.cross_host_half_wire;
    so.deterministic = deterministic_;
    Status s = shm::ShmExecutor::create(topo_, data_, local_, cross_, so, &shm_executor_);
    if (s.is_ok()) {
      executors_.push_back(shm_executor_.get());
      return Status::ok();
    }
    if (config.cpu_operations == CpuOperations::kShm) return s;
    no_shm_reason_ = s.message();
    KOLO_LOG(LogLevel::kInfo, "shared-memory executor unavailable, using MPI: " << s.message());
    return Status::ok();
  }

  // Every rank's pid, host name and host (the world rank of its host's first rank; under
  // KOLO_TEST_RANKS_PER_HOST the pretend host), for the dead-peer check.
  Status create_liveness(const Config& config) {
    struct Id {
      int pid, host;
      char name[64];
      HeartbeatSocket::Endpoint udp;  // heartbeats' side channel (core/heartbeat_socket.h)
      uint64_t token;                 // rank 0's is the job's
    } mine{};
    mine.pid = static_cast<int>(getpid());
    mine.host = topo_.rank;
    MPI_Bcast(&mine.host, 1, MPI_INT, 0, local_);
    std::snprintf(mine.name, sizeof(mine.name), "%s", host_name().c_str());
    std::unique_ptr<HeartbeatSocket> udp = HeartbeatSocket::open();
    if (udp) mine.udp = udp->local_endpoint(config.heartbeat_interface());
    mine.token = random_token();
    std::vector<Id> all(static_cast<size_t>(topo_.size));
    KOLO_RETURN_IF_ERROR(ops::mpi_status(
        MPI_Allgather(&mine, sizeof(Id), MPI_BYTE, all.data(), sizeof(Id), MPI_BYTE, data_), "MPI_Allgather(ids)"));
    std::vector<Liveness::Peer> peers(all.size());
    std::vector<HeartbeatSocket::Endpoint> endpoints(all.size());
    for (size_t r = 0; r < all.size(); ++r) {
      all[r].name[sizeof(all[r].name) - 1] = '\0';
      peers[r].pid = all[r].pid;
      peers[r].host = all[r].host;
      peers[r].host_name = all[r].name;
      endpoints[r] = all[r].udp;
    }
    if (udp) udp->set_peers(std::move(endpoints), all[0].token, topo_.rank);
    liveness_ = std::make_unique<Liveness>(
        topo_.rank, std::move(peers),
        std::chrono::milliseconds(static_cast<int64_t>(config.peer_timeout_seconds * 1000.0)), channel_.get(),
        thread_level() >= MPI_THREAD_MULTIPLE, std::move(udp));
    if (config.test_listener_gap_seconds > 0)
      liveness_->set_test_gap(
          std::chrono::milliseconds(static_cast<int64_t>(config.test_listener_gap_seconds * 1000.0)));
    if (config.test_mpi_heartbeat_stall_seconds > 0)
      liveness_->set_test_mpi_stall(
          std::chrono::milliseconds(static_cast<int64_t>(config.test_mpi_heartbeat_stall_seconds * 1000.0)));
    if (topo_.size > 1 && !liveness_->has_listener_thread())
      KOLO_LOG(LogLevel::kDebug, "heartbeats from the coordinator's waits (no listener thread: MPI thread level "
                                     << thread_level() << ", or no peer on another host)");
    return Status::ok();
  }

  static const char* thread_level_name(int level) {
    switch (level) {
      case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
      case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
      case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
      default: return "MPI_THREAD_MULTIPLE";
    }
  }

  static int thread_level() {
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    return provided;
  }

  Liveness* liveness() override { return liveness_.get(); }
  void* fast_board_memory() override { return shm_executor_ ? shm_executor_->fast_board() : nullptr; }

  Status rendezvous(const std::function<Status()>& while_waiting) override {
    return topo_.size == 1 ? Status::ok() : wait_barrier(data_, while_waiting);
  }

  Status rendezvous_set(int32_t id, const std::vector<int>& members,
                        const std::function<Status()>& while_waiting) override {
    if (members.size() < 2) return Status::ok();
    const std::vector<Executor*>* unused = nullptr;
    // A set whose executors cannot be made fails its collectives (the coordinator asks again
    // and reports it there), not the runtime; every member fails alike, so none waits here.
    // The members' meeting answers the board meanwhile (meet_members).
    if (!make_or_find_set(id, members, &unused, while_waiting).is_ok()) return Status::ok();
    return wait_barrier(sets_.at(id).comm, while_waiting);
  }

  // An MPI_Ibarrier on `comm`, polled: spins briefly, then yields, then sleeps, consulting the
  // dead-peer check and `while_waiting` (the fast path's board) all along.
  Status wait_barrier(MPI_Comm comm, const std::function<Status()>& while_waiting) {
    MPI_Request req;
    KOLO_RETURN_IF_ERROR(ops::mpi_status(MPI_Ibarrier(comm, &req), "MPI_Ibarrier"));
    const auto start = std::chrono::steady_clock::now();
    auto warn_at = start + std::chrono::seconds(60);
    for (;;) {
      int done = 0;
      KOLO_RETURN_IF_ERROR(ops::mpi_status(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test(barrier)"));
      if (done) return Status::ok();
      KOLO_RETURN_IF_ERROR(liveness_->check("waiting for peers to start a scheduled collective"));
      if (while_waiting) KOLO_RETURN_IF_ERROR(while_waiting());
      const auto now = std::chrono::steady_clock::now();
      const auto waited = now - start;
      if (waited < std::chrono::microseconds(30)) continue;  // peers usually arrive within µs
      if (waited < std::chrono::microseconds(500)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      if (now > warn_at) {
        KOLO_LOG(LogLevel::kWarning, "waited " << std::chrono::duration_cast<std::chrono::seconds>(waited).count()
                                                << " s for peers to start a scheduled collective");
        warn_at = now + std::chrono::seconds(60);
      }
    }
  }

  std::string describe_executors() const override {
    std::string d;
    if (!shm_executor_) {
      d = "allreduce=mpi broadcast=mpi allgather=mpi alltoall=mpi reducescatter=mpi";
    } else if (topo_.local_size == topo_.size) {
      d = "allreduce=shm broadcast=shm allgather=shm alltoall=shm reducescatter=shm";
    } else {
      // Hierarchical: shared memory within the host, MPI between one leader per host.
      d = "allreduce=shm+mpi(hierarchical) broadcast=mpi allgather=mpi alltoall=mpi reducescatter=mpi";
      // sliced: every local rank carries its slice between hosts; leader: local rank 0 all.
      d += shm_executor_->sliced() ? " cross_host=sliced" : " cross_host=leader";
      if (shm_executor_->sliced()) d += shm_executor_->half_wire() ? " half_wire=16bit" : " half_wire=float32";
    }
    if (deterministic_) d += " float_sum=rank-order";
    if (!shm_executor_)
      d += " shm=off(" + (no_shm_reason_.empty() ? std::string("KOLO_CPU_OPERATIONS=mpi") : no_shm_reason_) + ")";
    for (const auto& e : gpu_executors_) d += std::string(" gpu=") + e->name();
    return d;
  }

  // A process set's executors: MPI on a communicator of its members (MPI_Comm_create_group,
  // collective over the members only), and shared memory among its members on each host when
  // the shm group can be built for them (else MPI alone); in CUDA builds the GPU executors of
  // the global set, made the same way on the set's communicators (NCCL gets a communicator
  // of the set's members). No zero-copy arena (the job's arena belongs to the global set's
  // group; docs/collectives.md).
  Status set_executors(int32_t id, const std::vector<int>& members, const std::vector<Executor*>** out) override {
    return make_or_find_set(id, members, out, nullptr);
  }

  // set_executors; `while_waiting` (may be empty) is polled while the members meet.
  Status make_or_find_set(int32_t id, const std::vector<int>& members, const std::vector<Executor*>** out,
                          const std::function<Status()>& while_waiting) {
    if (auto it = sets_.find(id); it != sets_.end()) {
      *out = &it->second.list;
      return Status::ok();
    }
    SetExecutors& x = sets_[id];
    Status s = make_set_executors(id, members, &x, while_waiting);
    if (!s.is_ok()) {
      release_set(id);
      return Status::communication("process set " + std::to_string(id) + ": could not set up its executors: " +
                                   s.message());
    }
    *out = &x.list;
    return Status::ok();
  }

  void release_set(int32_t id) override {
    auto it = sets_.find(id);
    if (it == sets_.end()) return;
    SetExecutors& x = it->second;
    x.list.clear();
    x.gpu.clear();
    x.shm.reset();
    x.mpi.reset();
    const bool peer_dead = liveness_ && !liveness_->dead().is_ok();
    if (!peer_dead)
      for (MPI_Comm* c : {&x.comm, &x.local, &x.cross})
        if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
    sets_.erase(it);
  }

  const Topology& topology() const override { return topo_; }
  ControlChannel& channel() override { return *channel_; }
  const std::vector<Executor*>& executors() override { return executors_; }

  void finalize() override {
    if (finalized_) return;
    finalized_ = true;
    if (liveness_) liveness_->stop();  // its thread uses the channel and the communicators
    while (!sets_.empty()) release_set(sets_.begin()->first);
    executors_.clear();
    gpu_executors_.clear();
    shm_executor_.reset();  // before the MPI executor the staged one borrows
    mpi_executor_.reset();
    const bool peer_dead = liveness_ && !liveness_->dead().is_ok();
    if (peer_dead) channel_->abandon();
    channel_.reset();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (peer_dead) {
      // MPI_Comm_free and MPI_Finalize may wait for the dead peer forever; the process ends
      // without them (the launcher may say so).
      KOLO_LOG(LogLevel::kWarning, "not finalizing MPI: " << liveness_->dead().message());
      return;
    }
    ops::free_half_ops();
    for (MPI_Comm* c : {&control_, &data_, &meet_, &local_, &cross_})
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
    if (owns_mpi_) MPI_Finalize();
  }

 private:
  struct SetExecutors {
    MPI_Comm comm = MPI_COMM_NULL, local = MPI_COMM_NULL, cross = MPI_COMM_NULL;
    std::unique_ptr<ops::MpiExecutor> mpi;
    std::unique_ptr<shm::ShmExecutor> shm;
    std::vector<std::unique_ptr<Executor>> gpu;  // empty unless KOLO_HAVE_CUDA
    std::vector<Executor*> list;
  };

  // Before MPI_Comm_create_group, which is collective over the members and cannot be
  // bounded (a member that died before calling it would keep the others inside forever):
  // the members meet with one small message to each other, polled with the dead-peer check,
  // so a member already dead is named here instead (one that dies after the meeting is
  // named by make_set_comms, ops/mpi_set_comms.h).
  // `while_waiting` (the fast path's board, may be empty) is polled all along: a member that
  // has not come yet may be in a board round that waits for this rank (a global-set
  // collective on the board while the set starts), and would never come otherwise. Once
  // every member has met, all of them are past the board: what follows waits only on them.
  Status meet_members(int32_t id, const std::vector<int>& members, const std::function<Status()>& while_waiting) {
    const int tag = static_cast<int>(id % 32768);  // ids are unique per job; creations are ordered
    static const char kHello = 1;
    auto got = std::make_unique<char[]>(members.size());
    std::vector<MPI_Request> reqs;
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i] == topo_.rank) continue;
      MPI_Request r;
      KOLO_RETURN_IF_ERROR(ops::mpi_status(MPI_Irecv(&got[i], 1, MPI_CHAR, members[i], tag, meet_, &r), "MPI_Irecv"));
      reqs.push_back(r);
      KOLO_RETURN_IF_ERROR(
          ops::mpi_status(MPI_Isend(&kHello, 1, MPI_CHAR, members[i], tag, meet_, &r), "MPI_Isend"));
      reqs.push_back(r);
    }
    const std::string during = "process set " + std::to_string(id) + ": waiting for its members to create its communicator";
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      int done = 0;
      KOLO_RETURN_IF_ERROR(ops::mpi_status(
          MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall"));
      if (done) return Status::ok();
      Status s = liveness_ ? liveness_->check(during.c_str()) : Status::ok();
      if (s.is_ok() && while_waiting) s = while_waiting();
      if (!s.is_ok()) {
        // The runtime stops with this error. A receive that could not be cancelled may still
        // land: its buffer is left allocated.
        for (MPI_Request& r : reqs) {
          if (r == MPI_REQUEST_NULL) continue;
          MPI_Cancel(&r);
          MPI_Request_free(&r);
        }
        got.release();
        return s;
      }
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited < std::chrono::microseconds(500)) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // Test hook (KOLO_TEST_DIE_IN_SET_SETUP; test/mpi/dead_peer.cc, cases set-setup and
  // set-created): this rank dies while a set is made, after its request reached rank 0. The
  // line is the driver's.
  void test_die(const char* when) {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    std::printf("VICTIM rank %d t=%.6f (%s)\n", topo_.rank, static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9, when);
    std::fflush(stdout);
    kill(getpid(), SIGKILL);
  }

  Status make_set_executors(int32_t id, const std::vector<int>& members, SetExecutors* x,
                            const std::function<Status()>& while_waiting) {
    if (test_die_in_set_setup_ == 1) test_die("as its set's first collective begins");
    KOLO_RETURN_IF_ERROR(meet_members(id, members, while_waiting));
    if (test_die_in_set_setup_ == 2) test_die("after its members met");
    // The communicators and the shared-memory executor: blocking collectives over the members,
    // run where a member dying now cannot hold this rank (ops/mpi_set_comms.h).
    ops::SetCommsPlan plan;
    plan.parent = data_;
    plan.id = id;
    plan.members = members;
    plan.host_id = host_id_;
    plan.shm = cpu_operations_ != CpuOperations::kMpi;
    plan.shm_options.peer_timeout = std::chrono::seconds(60);
    plan.shm_options.liveness = liveness_.get();
    plan.shm_options.sliced_cross_host = cross_host_sliced_;
    plan.shm_options.half_wire = cross_host_half_wire_;
    plan.shm_options.deterministic = deterministic_;
    plan.shm_options.publishes_arena = false;  // the job's arena stays the global set's executor's
    auto made = std::make_shared<ops::SetComms>();
    KOLO_RETURN_IF_ERROR(ops::make_set_comms(plan, made, liveness_.get(), while_waiting));
    x->comm = made->comm, x->local = made->local, x->cross = made->cross;  // released with x on failure
    if (!made->status.is_ok()) {
      // A member that died inside the collective may have made it fail rather than block.
      if (liveness_) KOLO_RETURN_IF_ERROR(liveness_->check_now("creating a process set's communicators"));
      return made->status;
    }
    x->mpi = std::make_unique<ops::MpiExecutor>(x->comm, mpi_executor_->chunk_bytes(), liveness_.get(), deterministic_);
#ifdef KOLO_HAVE_CUDA
    const Topology& t = made->topo;
    ops::gpu::GpuExecutorSetup gpu = gpu_setup_;
    gpu.data_comm = x->comm, gpu.local_comm = x->local, gpu.cross_comm = x->cross;
    KOLO_RETURN_IF_ERROR(ops::gpu::create_gpu_executors(gpu, t, x->mpi.get(), &x->gpu));
    for (auto& e : x->gpu) x->list.push_back(e.get());
#endif
    if (made->shm) {
      x->shm = std::move(made->shm);
      x->list.push_back(x->shm.get());
    } else if (!made->shm_status.is_ok()) {
      if (cpu_operations_ == CpuOperations::kShm)
        return made->shm_status;  // KOLO_CPU_OPERATIONS=shm: no silent fallback, as for the global set
      KOLO_LOG(LogLevel::kInfo, "process set " << id << ": shared memory unavailable, using MPI: " << made->shm_status.message());
    }
    x->list.push_back(x->mpi.get());
    return Status::ok();
  }

  Topology topo_;
  bool owns_mpi_ = false;
  bool finalized_ = false;
  MPI_Comm control_ = MPI_COMM_NULL, data_ = MPI_COMM_NULL, local_ = MPI_COMM_NULL, cross_ = MPI_COMM_NULL;
  MPI_Comm meet_ = MPI_COMM_NULL;  // process sets' members meet here before creating their communicator
  int test_die_in_set_setup_ = 0;  // KOLO_TEST_DIE_IN_SET_SETUP=1 or 2 (make_set_executors)
  std::unique_ptr<ops::MpiChannel> channel_;
  std::unique_ptr<Liveness> liveness_;  // borrows channel_; outlives the executors
  std::unique_ptr<ops::MpiExecutor> mpi_executor_;
  std::unique_ptr<shm::ShmExecutor> shm_executor_;
  std::vector<std::unique_ptr<Executor>> gpu_executors_;  // empty unless KOLO_HAVE_CUDA
#ifdef KOLO_HAVE_CUDA
  ops::gpu::GpuExecutorSetup gpu_setup_;  // the global set's; a process set's copies it
#endif
  std::vector<Executor*> executors_;
  std::string no_shm_reason_;  // why there is no shm executor in auto mode
  int host_id_ = 0;            // the first job rank of this rank's (pretend) host
  CpuOperations cpu_operations_ = CpuOperations::kAuto;
  bool cross_host_sliced_ = true;  // KOLO_CROSS_HOST_ALLREDUCE
  bool cross_host_half_wire_ = false;  // KOLO_CROSS_HOST_HALF_WIRE
  bool deterministic_ = false;  // KOLO_DETERMINISTIC, agreed by every rank
  std::map<int32_t, SetExecutors> sets_;  // process sets' executors, made on first use
};

}  // namespace

Status create_mpi_backend(const Config& config, int* argc, char*** argv, std::unique_ptr<Backend>* out) {
  auto b = std::make_unique<MpiBackend>();
  KOLO_RETURN_IF_ERROR(b->init(config, argc, argv));
  *out = std::move(b);
  return Status::ok();
}

}  // namespace kolo

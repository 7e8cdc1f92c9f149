// core/config.h — every KOLO_* knob, read once, with its default and validation.
//
// Config::from_env() is the only place kolo reads its environment. A malformed value is an
// error naming the variable, the value and the accepted form; init() refuses to start with
// it. Config::parse() takes a lookup function so tests can feed values without setenv.
// docs/knobs.md lists the same knobs; keep the two in step.
//
// Thread safety: a Config is a value, read-only after init.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo {

enum class LogLevel { kTrace = 0, kDebug, kInfo, kWarning, kError };

enum class CpuOperations { kAuto, kMpi, kShm };

// The transport between ranks (core/backend.h): MPI (the default) or Gloo (docs/gloo.md).
enum class TransportKind { kMpi, kGloo };

struct Config {
  // Allreduce tensors of one kind are packed together up to this many bytes (KOLO_FUSION_THRESHOLD).
  size_t fusion_threshold_bytes = 4u << 20;
  // Longest the coordinator sleeps when idle before looking for peers' work (KOLO_CYCLE_TIME, ms).
  double cycle_time_ms = 1.0;
  // CPU reductions run in pieces of this many bytes, so each piece stays in cache (KOLO_CPU_CHUNK_BYTES).
  size_t cpu_chunk_bytes = 1u << 20;
  CpuOperations cpu_operations = CpuOperations::kAuto;  // KOLO_CPU_OPERATIONS
  // Per rank: kolo::allocate_shared's capacity (kolo/memory.h), reserved (not backed) in
  // /dev/shm at init (KOLO_SHM_ARENA_BYTES). `auto` (the default): the shm executor sizes it
  // from /dev/shm, or makes none where it cannot (ShmExecutor::Options::arena_auto);
  // otherwise shm_arena_bytes, 0 = none.
  bool shm_arena_auto = true;
  size_t shm_arena_bytes = 0;
  // Per rank: the shared pool that alltoall results are allocated in on one host, so that
  // peers write their blocks straight into them (ops/shm/shm_result_pool.h); sparse,
  // committed as used (KOLO_SHM_RESULT_POOL_BYTES; 0 = none).
  size_t shm_result_pool_bytes = size_t{256} << 20;
  // GPU executor: auto (NCCL unless ranks share a GPU, then host-staged), nccl, staged.
  std::string gpu_operations = "auto";                  // KOLO_GPU_OPERATIONS
  // GPU allreduce as NCCL reduce-scatter in the host, MPI across hosts, NCCL all-gather.
  bool hierarchical_allreduce = false;                  // KOLO_HIERARCHICAL_ALLREDUCE
  // CPU allreduce across hosts: every local rank carries its slice between hosts (sliced,
  // needs the same ranks on every host) or the host's leader carries it all (leader).
  bool cross_host_sliced = true;                        // KOLO_CROSS_HOST_ALLREDUCE
  // fp16/bf16 on the sliced path between hosts: float32 (the default: rounded once, as on one
  // host, twice the bytes) or in 16 bits (16bit: half the bytes, a partial rounded at each
  // host it leaves, then the sum rounded again).
  bool cross_host_half_wire = false;                    // KOLO_CROSS_HOST_HALF_WIRE
  // Float sums, averages and products in one order, rank 0's value first and each rank's
  // added in rank order, with every CPU executor and host layout: the bits depend on the
  // inputs and the rank count alone (docs/runtime.md, "One order for float sums").
  bool deterministic = false;                           // KOLO_DETERMINISTIC
  LogLevel log_level = LogLevel::kWarning;              // KOLO_LOG_LEVEL
  // A tensor submitted by some ranks but not all for this long is reported (0 = never).
  double stall_check_seconds = 60.0;     // KOLO_STALL_CHECK_TIME_SECONDS
  // ... and after this long the job stops with that report (0 = never).
  double stall_shutdown_seconds = 0.0;   // KOLO_STALL_SHUTDOWN_TIME_SECONDS
  // A rank on another host from which nothing was heard for this long is dead; ranks on
  // this host are judged by their process instead (core/liveness.h).
  double peer_timeout_seconds = 5.0;     // KOLO_PEER_TIMEOUT_SECONDS
  // Test hook: pretend every `n` consecutive ranks share a host (0 = real hosts).
  int ranks_per_host_override = 0;       // KOLO_TEST_RANKS_PER_HOST
  // Test hook: the coordinator sleeps this long before it executes each collective, outside
  // any wait (no dead-peer check, no heartbeat from its waits): a long CPU step in a starved
  // process, made deterministic (0 = off; core/liveness.h).
  double test_stall_seconds = 0.0;       // KOLO_TEST_STALL_SECONDS
  // Test hook: this rank's coordinator stops with an internal error when it takes a request
  // named "kolo.test.fault" (its peers must learn of it; -1 = off; docs/correctness.md).
  int test_fault_rank = -1;              // KOLO_TEST_FAULT_RANK
  // Test hook: this rank kills itself while a process set's executors are set up (1: as
  // it begins, 2: after the members' meeting; 0: off).
  int test_die_in_set_setup = 0;         // KOLO_TEST_DIE_IN_SET_SETUP
  // Test hook: the heartbeat listener thread sleeps this long after each tick, as a thread
  // starved by a loaded host (0 = off; core/liveness.h).
  double test_listener_gap_seconds = 0.0;  // KOLO_TEST_LISTENER_GAP_SECONDS
  // Test hook: every poll of the MPI heartbeat thread takes this long more, as an MPI call
  // held up in MPI's progress engine would (0 = off; core/liveness.h).
  double test_mpi_heartbeat_stall_seconds = 0.0;  // KOLO_TEST_MPI_HEARTBEAT_STALL_SECONDS
  // Rank 0 writes a Chrome trace here (empty = off).
  std::string timeline_path;             // KOLO_TIMELINE
  bool timeline_mark_cycles = false;     // KOLO_TIMELINE_MARK_CYCLES
  // With ranks in kolo::join(): false ("kolo", the default), an average divides by the ranks
  // that contributed and allgather/broadcast take the joined ranks along; true ("horovod",
  // kolo.torch's default), an average divides by every rank and allgather/broadcast fail.
  bool join_horovod = false;             // KOLO_JOIN_RULES
  // Online tuning of fusion threshold, cycle time and chunk size (core/autotune.h).
  // Requests seen before travel as ids (core/response_cache.h); 0 = off.
  size_t cache_capacity = 1024;          // KOLO_CACHE_CAPACITY
  // Rank 0 holds ready tensors while a burst is still arriving: the longest gap between
  // arrivals that counts as one burst, in microseconds (0 = off; core/burst_hold.h).
  int burst_hold_us = 100;               // KOLO_BURST_HOLD_MICROSECONDS
  // Ranks of one host agree on tensors negotiated before through shared memory, without
  // rank 0 (core/fast_board.h; needs the shm executor, one host and the response cache).
  bool fast_path = true;                 // KOLO_FAST_PATH
  // With the fast path on, a thread waiting on a handle runs the coordinator's passes itself
  // instead of sleeping until the coordinator thread wakes it (core/wait_help.h).
  bool wait_helps = true;                // KOLO_WAIT_HELPS
  // With waiters helping, the coordinator thread leaves requests that are still arriving
  // (less than burst_hold_us apart) to the thread that will wait for them, so that a burst
  // goes out in one board round (IdlePolicy::defer_burst).
  bool burst_defer = false;              // KOLO_BURST_DEFER
  bool autotune = false;                 // KOLO_AUTOTUNE
  std::string autotune_log;              // KOLO_AUTOTUNE_LOG: CSV of every sample
  int autotune_samples = 24;             // KOLO_AUTOTUNE_SAMPLES: budget of settings tried
  int autotune_window = 20;              // KOLO_AUTOTUNE_WINDOW: response lists per sample
  // Every rank prints one line at init: host, local rank, executor per level, interface.
  bool verbose = false;                  // KOLO_VERBOSE
  // The interface for traffic between hosts: must exist on every host; Open MPI's TCP BTL
  // and NCCL's sockets use it unless their own variables say otherwise (empty = theirs).
  std::string network_interface;         // KOLO_NETWORK_INTERFACE
  // Open MPI's own choice of TCP interfaces (comma-separated), read here and not set: the
  // verbose report names it, and where KOLO_NETWORK_INTERFACE is empty the heartbeats take
  // its first interface (empty = unset). Not a kolo knob: never validated.
  std::string mpi_tcp_interfaces;        // OMPI_MCA_btl_tcp_if_include
  // The interface between hosts as kolo's heartbeats see it: KOLO_NETWORK_INTERFACE, else the
  // first of OMPI_MCA_btl_tcp_if_include (empty: none chosen).
  std::string heartbeat_interface() const {
    return !network_interface.empty() ? network_interface : mpi_tcp_interfaces.substr(0, mpi_tcp_interfaces.find(','));
  }
  // Process sets registered at init (ids 1, 2, ... in this order), e.g. "0,1;2,3"; every
  // rank must give the same (core/process_set.h). Ranks are checked against the job's size
  // by init().
  std::vector<std::vector<int>> process_sets;  // KOLO_PROCESS_SETS
  // The transport (KOLO_BACKEND): mpi, or gloo (ops/gloo_backend.cc, docs/gloo.md).
  TransportKind transport = TransportKind::kMpi;
  // Gloo only (all in docs/gloo.md). The Redis server of the rendezvous, host and port
  // (KOLO_GLOO_REDIS=host:port; required with gloo).
  std::string gloo_redis_host;
  int gloo_redis_port = 0;
  // The job's key in the store (KOLO_GLOO_JOB; default "ompi-" + Open MPI's job id under
  // mpirun) and the generation within it (KOLO_GLOO_GENERATION): every store key of a
  // backend lives under "kolo/<job>/<generation>/", so a world re-formed under the next
  // generation never reads the previous one's keys.
  std::string gloo_job;
  int64_t gloo_generation = 0;
  // The longest any Gloo wait on a peer lasts before it fails (KOLO_GLOO_TIMEOUT_SECONDS).
  double gloo_timeout_seconds = 60.0;
  // This rank and the job's size: KOLO_RANK/KOLO_SIZE, else Open MPI's OMPI_COMM_WORLD_RANK/
  // OMPI_COMM_WORLD_SIZE (-1 when neither is set; the Gloo backend then refuses to start).
  int launcher_rank = -1;
  int launcher_size = -1;
  // KVStore (kolo/kvstore.h): the last this many ranks are parameter servers (dist types).
  int num_servers = 0;                   // KOLO_NUM_SERVERS
  // ... and a key of at least this many elements is split across all of them.
  int64_t kvstore_bigarray_bound = 1000000;  // KOLO_KVSTORE_BIGARRAY_BOUND

  using Lookup = std::function<std::optional<std::string>(const std::string& name)>;
  // Reads the knobs through `lookup` (absent = default). Fills *out or returns the error.
  static Status parse(const Lookup& lookup, Config* out);
  // parse() over the process environment.
  static Status from_env(Config* out);
  // Names of KOLO_* variables in the environment that kolo does not know (likely typos).
  static std::vector<std::string> unknown_env_names();
};

// Parsers shared by the knobs; exposed for tests. Each returns false on a malformed value.
bool parse_bytes(const std::string& text, size_t* out);        // "1048576", "64K", "4M", "1G"
bool parse_non_negative(const std::string& text, double* out);  // "0.5", "60"

}  // namespace kolo

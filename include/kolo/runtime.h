// kolo/runtime.h — starting and stopping kolo, and where this process sits in the job.
//
// init() initialises MPI if the program has not (then shutdown() finalises it), reads the
// KOLO_* environment (a malformed value throws kolo::Error naming the variable and the
// accepted form), and starts the one coordinator thread of this process. It is idempotent.
// After init() returns, only kolo's coordinator thread calls MPI on kolo's communicators;
// the program may still use MPI itself on its own communicators (kolo asks for
// MPI_THREAD_MULTIPLE).
//
// shutdown() stops the coordinator on every rank: collectives still pending anywhere fail
// with a message saying which rank shut down. Called automatically at exit if forgotten.
//
// Thread safety: rank()/size()/... may be called from any thread after init(). init() and
// shutdown() must not race with each other.
#pragma once

#include <cstdint>
#include <string>

namespace kolo {

void init();
void init(int* argc, char*** argv);
void shutdown();
bool is_initialized();

// Starts writing the timeline (docs/timeline.md) to `path` on rank 0, as KOLO_TIMELINE does
// from init(); one being written is closed first. Every rank may call it (only rank 0
// writes). stop_timeline() closes the file (nothing when none is open). Throws kolo::Error
// when kolo is not running or the file cannot be opened. Not concurrently with shutdown().
void start_timeline(const std::string& path, bool mark_cycles = false);
void stop_timeline();

int rank();        // 0 .. size()-1 in the job
int size();        // number of ranks in the job
int local_rank();  // rank among the processes on this host
int local_size();  // processes on this host
int cross_rank();  // index of this host among hosts (rank of the local leader's group)
int cross_size();  // number of hosts

// Counters of this process's coordinator since init(), for benchmarks and diagnostics.
struct RuntimeStats {
  uint64_t active_cycles = 0;        // coordinator passes that handled any work
  uint64_t collectives = 0;          // responses executed (a fused buffer counts once)
  uint64_t tensors = 0;              // tensors completed (fused ones counted each)
  double coordination_seconds = 0;   // time in active passes outside executors and rendezvous
  double rendezvous_seconds = 0;     // waiting for every rank to reach a response list
  double execution_seconds = 0;      // time inside executors (copies + transport)
  // Response cache (KOLO_CACHE_CAPACITY): rank 0 counts the requests its peers sent, by
  // cache id (4 bytes, no validation) or in full. Zero on other ranks.
  uint64_t cache_capacity = 0;       // entries; 0 = off
  uint64_t peer_requests_cached = 0;
  uint64_t peer_requests_full = 0;
  // Of those, the requests on process sets other than the global one (each set has a cache
  // of its own: docs/collectives.md, "Process sets").
  uint64_t peer_set_requests_cached = 0;
  uint64_t peer_set_requests_full = 0;
  // The fast path (one host; docs/runtime.md): collectives this rank ran after agreeing on
  // them through shared memory instead of rank 0, and its rounds of agreement.
  uint64_t fast_collectives = 0;
  uint64_t fast_rounds = 0;
  // KOLO_WAIT_HELPS (docs/runtime.md, "The waiter runs the pass"): coordinator passes that
  // did work and ran on a thread waiting on a handle instead of the coordinator thread.
  // Zero where helping is off or there is no board.
  uint64_t helped_passes = 0;
};
RuntimeStats runtime_stats();

}  // namespace kolo

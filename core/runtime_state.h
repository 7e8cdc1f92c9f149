// core/runtime_state.h — the one process-wide runtime and the gate every entry point passes,
// shared by its lifecycle (core/runtime.cc: init, shutdown, signals, queries) and the
// collective entry points (core/collectives.cc). Internal to core/.
//
// The globals that remain, each defined in core/runtime.cc, and why each must exist:
//   g_runtime    kolo's API is free functions (as Horovod's and MPI's): the runtime they
//                reach must be found without an argument. Created by init(), destroyed by
//                shutdown() (g_mu serialises the two).
//   g_mu         init() and shutdown() may race from any thread and from atexit.
//   g_finalized  MPI cannot be initialised twice in one process: a second init() must be
//                refused with that reason, and a call after shutdown() says "shut down", not
//                "not initialised" (docs/correctness.md, finding 3).
//   g_running    is_initialized() is read lock-free by any thread.
//   g_submitting, g_closing  the submission gate below (docs/correctness.md, finding 5): a
//                submission racing shutdown() on another thread never touches a runtime being
//                destroyed, at one atomic increment and decrement per submission.
//   g_hooks(_mu) detail::add_before_finalize: clients with threads on MPI (the dist
//                KVStore) stop them after the last lease and before MPI_Finalize.
//   g_previous_terminate  the std::terminate handler kolo replaced, called after it told its
//                peers why this rank ends.
//   Coordinator::note_signal's pending signal (core/coordinator.cc): a signal handler may only
//                store into an atomic; the loop acts on it.
//   The wait helper (core/wait_help.cc): a thread waiting on a handle runs the coordinator's
//                passes, and a handle knows no runtime; the coordinator attaches itself.
//
// Thread safety: the gate from any thread; a Runtime's members as their own headers say.
#pragma once

#include <atomic>
#include <memory>

#include "core/backend.h"
#include "core/config.h"
#include "core/coordinator.h"
#include "core/process_set.h"
#include "core/tensor_queue.h"
#include "core/timeline.h"
#include "kolo/status.h"

namespace kolo::detail {

struct Runtime {
  Config config;
  std::unique_ptr<Backend> backend;
  TensorQueue queue;
  Timeline timeline;        // rank 0 only, when KOLO_TIMELINE is set
  ProcessSetRegistry sets;  // before the coordinator, which borrows it
  std::unique_ptr<Coordinator> coordinator;
  Topology topo;
};

extern std::unique_ptr<Runtime> g_runtime;
extern std::atomic<bool> g_finalized;
// Submissions in progress, and whether shutdown() has begun. A submission enters (count
// first, then the flag: both sequentially consistent), so shutdown(), which sets the flag and
// then waits for the count to reach 0, either sees it and waits (a queue push is a short
// lock), or the submission sees the flag and fails with the shutdown message.
extern std::atomic<int> g_submitting;
extern std::atomic<bool> g_closing;

// Counts a submission in for its lifetime (until the push): shutdown() waits for it.
class Submitting {
 public:
  Submitting() { g_submitting.fetch_add(1, std::memory_order_seq_cst); }
  ~Submitting() { g_submitting.fetch_sub(1, std::memory_order_release); }
  Submitting(const Submitting&) = delete;
  Submitting& operator=(const Submitting&) = delete;
};

// "kolo has been shut down ..." (a call after or racing shutdown()).
Status shut_down();
// Why there is no runtime: never initialised, or shut down (MPI cannot start again).
Status no_runtime();
// The runtime; throws kolo::Error (no_runtime()) when there is none.
Runtime& runtime();

// kolo::init() (ops/init.cc chooses the backend): builds and starts the runtime unless one
// runs; throws kolo::Error on failure, or after shutdown() (MPI cannot start twice).
void init_runtime(int* argc, char*** argv, BackendFactory make_backend);

}  // namespace kolo::detail

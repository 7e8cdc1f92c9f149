// core/wait_help.h — a thread waiting on a handle does the coordinator's work itself.
//
// Why: on one host a small allreduce on the fast path (docs/runtime.md, "The fast path")
// takes about a microsecond of real work (a board round and a one-step shared-memory
// reduce), but handing the request to the coordinator thread and the completion back to
// the waiting thread cost ~1.2 µs each on a loaded 2-core machine. A waiter that runs the
// coordinator's passes itself (under the coordinator's engine lock, so that one thread at a
// time does) pays neither: it takes its own request from the queue, agrees on it, executes
// it and finds its handle done. While any thread helps, the coordinator thread stays out
// of the way (it naps), so the two do not fight over the cores; a helper that sees nothing
// happen for the coordinator's spin window (200 µs) gives up and sleeps on its handle as
// before, and the coordinator thread takes over again.
//
// Only where the coordinator allows it (one host with the fast path's board, KOLO_WAIT_HELPS=1).
// The helper is reached through one process-wide pointer: a handle's wait knows no runtime
// (the one runtime per process, core/runtime_state.h). Ownership: the registry borrows the
// helper between attach and detach.
// Thread safety: help_wait from any thread; attach/detach from the thread that owns the
// coordinator (detach waits, bounded by one pass, for helpers inside it to leave).
#pragma once

#include <atomic>
#include <chrono>

namespace kolo {

namespace detail {

// What a waiting thread can help: the coordinator (Coordinator::help).
class WaitHelper {
 public:
  // Runs passes on the calling thread until `done`, or as the helper decides to stop; with
  // a `deadline`, only passes expected to end before it.
  virtual void help(const std::atomic<bool>& done, std::chrono::steady_clock::time_point deadline) = 0;

 protected:
  ~WaitHelper() = default;
};

// Lets waiting threads help `h` (null: nobody to help).
void attach_wait_helper(WaitHelper* h);
// Stops new helpers and waits until none is inside the coordinator any more.
void detach_wait_helper();
// Runs the attached coordinator's passes on this thread until `done`, the coordinator
// stops, or nothing happens for a while; returns at once when none is attached. With a
// `deadline` (Handle::wait_for), only passes expected to end before it (Coordinator::help).
void help_wait(const std::atomic<bool>& done,
               std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

}  // namespace detail
}  // namespace kolo

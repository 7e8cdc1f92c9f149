// kolo/handle.h — the work handle returned by every asynchronous collective.
//
// A Handle refers to one collective in flight. Waiting on it:
//   - synchronize(h) blocks until the collective finished on this rank; if it failed it
//     throws kolo::Error whose message names the tensor, the ranks involved and the cause.
//   - poll(h) returns true once it finished (successfully or not) and never blocks.
//   - h.wait_for(timeout) waits at most `timeout`; returns false if still running. Like
//     synchronize(), it may run the coordinator's work on the calling thread meanwhile, but
//     only work expected to end before the timeout (docs/runtime.md, "Waiting threads help").
// Errors cannot be lost: a failed handle that is destroyed without anyone having looked
// at its result (synchronize, status()) prints the error to stderr.
//
// Ownership: Handles are cheap shared references; copies refer to the same collective.
// Thread safety: all members may be called from any thread, concurrently.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "kolo/status.h"
#include "kolo/tensor.h"

namespace kolo {

namespace detail {
struct HandleState;
}

class [[nodiscard]] Handle {
 public:
  Handle() = default;
  explicit Handle(std::shared_ptr<detail::HandleState> s) : state_(std::move(s)) {}

  bool valid() const { return state_ != nullptr; }
  // True once the collective has completed (ok or failed).
  bool done() const;
  // Blocks until done; returns the outcome without throwing.
  const Status& status() const;
  // Blocks at most `timeout`; true when done.
  bool wait_for(std::chrono::milliseconds timeout) const;
  // Allgather only: the gathered tensor (blocks until done; throws on failure, and throws
  // kolo::Error at once on the handle of any other collective).
  const Tensor& gathered() const;
  // Allgather, alltoall, reducescatter: this rank's result, owned by the handle (blocks until
  // done; throws on failure, and at once on the handle of any other collective or a group).
  const Tensor& output() const&;
  // On an rvalue handle (a temporary, or std::move(h)): the same result moved out of the
  // handle instead of copied — the synchronous forms (kolo::alltoall, ...) return it so, with
  // no second copy of a large result. Copies of the handle see an empty tensor afterwards.
  Tensor output() &&;
  // Alltoall only: the rows received from each rank, in rank order (blocks; throws likewise).
  const std::vector<int64_t>& received_splits() const;
  // Grouped allgather / reducescatter only: member i's result at [i] (blocks; throws likewise).
  const std::vector<Tensor>& outputs() const&;
  // On an rvalue handle: the results moved out, as output() && does.
  std::vector<Tensor> outputs() &&;
  // join_async() only: the last rank to join (blocks; throws on failure, and at once on the
  // handle of anything else).
  int last_joined_rank() const;

 private:
  std::shared_ptr<detail::HandleState> state_;
};

// Blocks until `h` completes; throws kolo::Error if the collective failed.
void synchronize(const Handle& h);
// Non-blocking completion check.
bool poll(const Handle& h);

}  // namespace kolo

// ops/gloo_common.h — what kolo's Gloo code shares: turning Gloo's exceptions into Status,
// and making a Gloo context (a full mesh of TCP pairs) through the rendezvous store.
//
// Gloo reports I/O failures (a peer gone, a timeout) by throwing gloo::IoException and broken
// invariants by throwing gloo::EnforceNotMet; kolo's code never lets either escape: every
// Gloo call runs inside gloo_call(), which returns Status::communication naming the call.
// After an IoException Gloo's context is unusable (its pairs are closed); the runtime stops
// on the error, as on every transport error.
//
// Thread safety: plain functions; a Store is used by one thread at a time.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <string>

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/device.h>

#include "kolo/status.h"

namespace kolo {
class Liveness;
}

namespace kolo::ops {

// Runs fn(); a std::exception from it (Gloo's, or the standard library's) becomes a
// communication error "<what>: <its text>".
template <typename Fn>
Status gloo_call(const std::string& what, Fn&& fn) {
  try {
    fn();
    return Status::ok();
  } catch (const std::exception& e) {
    return Status::communication(what + ": " + e.what());
  }
}

// After a Gloo operation failed with `error`: a peer closing its TCP connections is how a
// death usually shows, sooner than the dead-peer check can judge it (a peer on another host
// is judged by its silence, up to KOLO_PEER_TIMEOUT_SECONDS). Polls `liveness` (may be null)
// for up to its timeout and a second, and returns its verdict naming the dead rank, or
// `error` if none comes. Coordinator thread (Liveness::check's rule).
Status gloo_failure(const Status& error, Liveness* liveness, const char* during);

// Connects a context of `size` ranks in which this process is `rank`, through `store` under
// `prefix` (a key of its own: the store refuses to set a key twice). Every wait (the store's
// and the pairs' connections) and every later operation on the context is bounded by
// `timeout`. Collective over the ranks that use the prefix.
Status connect_gloo_context(gloo::rendezvous::Store& store, const std::string& prefix, int rank, int size,
                            const std::shared_ptr<gloo::transport::Device>& device,
                            std::chrono::milliseconds timeout, std::shared_ptr<gloo::Context>* out);

}  // namespace kolo::ops

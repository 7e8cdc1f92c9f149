#include "ops/gloo_common.h"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>

#include <thread>

#include "core/liveness.h"

namespace kolo::ops {

Status gloo_failure(const Status& error, Liveness* liveness, const char* during) {
  if (error.is_ok() || error.code() != Status::Code::kCommunication || liveness == nullptr) return error;
  const auto until = std::chrono::steady_clock::now() + liveness->timeout() + std::chrono::seconds(1);
  for (;;) {
    Status verdict = liveness->check_now(during);
    if (!verdict.is_ok()) return verdict;
    if (std::chrono::steady_clock::now() > until) return error;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Status connect_gloo_context(gloo::rendezvous::Store& store, const std::string& prefix, int rank, int size,
                            const std::shared_ptr<gloo::transport::Device>& device,
                            std::chrono::milliseconds timeout, std::shared_ptr<gloo::Context>* out) {
  return gloo_call("connecting Gloo context \"" + prefix + "\" (rank " + std::to_string(rank) + " of " +
                       std::to_string(size) + ")",
                   [&] {
                     gloo::rendezvous::PrefixStore scoped(prefix, store);
                     auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
                     context->setTimeout(timeout);
                     std::shared_ptr<gloo::transport::Device> dev = device;
                     context->connectFullMesh(scoped, dev);
                     *out = std::move(context);
                   });
}

}  // namespace kolo::ops

// kolo::Handle and its shared state (see kolo/handle.h, core/handle_state.h).
#include <cstdio>

#include "core/handle_state.h"

namespace kolo {
namespace detail {

HandleState::~HandleState() {
  // An error nobody looked at must not vanish silently.
  if (done && !observed && !status.is_ok())
    std::fprintf(stderr, "kolo: collective \"%s\" failed and its handle was dropped unchecked: %s\n",
                 name.c_str(), status.message().c_str());
}

void HandleState::complete(Status s) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (done) return;
    status = std::move(s);
    done = true;
  }
  cv.notify_all();
}

void HandleState::wait() {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
}

}  // namespace detail

namespace {
detail::HandleState& must(const std::shared_ptr<detail::HandleState>& s) {
  if (!s) throw Error(Status::invalid_argument("kolo::Handle: waiting on an empty handle"));
  return *s;
}
}  // namespace

bool Handle::done() const {
  auto& s = must(state_);
  std::lock_guard<std::mutex> lock(s.mu);
  return s.done;
}

const Status& Handle::status() const {
  auto& s = must(state_);
  s.wait();
  std::lock_guard<std::mutex> lock(s.mu);
  s.observed = true;
  return s.status;
}

bool Handle::wait_for(std::chrono::milliseconds timeout) const {
  auto& s = must(state_);
  std::unique_lock<std::mutex> lock(s.mu);
  return s.cv.wait_for(lock, timeout, [&] { return s.done; });
}

const Tensor& Handle::gathered() const {
  if (must(state_).kind != OpKind::kAllgather)
    throw Error(Status::invalid_argument("kolo::Handle::gathered() on \"" + state_->name +
                                         "\": only allgather handles hold a gathered tensor; this one is " +
                                         std::string(op_kind_name(state_->kind))));
  throw_if_error(status());
  return state_->gathered;
}

void synchronize(const Handle& h) { throw_if_error(h.status()); }

bool poll(const Handle& h) { return h.done(); }

}  // namespace kolo

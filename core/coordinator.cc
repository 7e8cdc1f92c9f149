// The coordinator loop (see core/coordinator.h and docs/runtime.md for the protocol).
#include "core/coordinator.h"

#include <algorithm>

#include "core/fusion.h"
#include "core/logging.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;

// How long a rank keeps spinning after the last activity before it starts to sleep: long
// enough to catch a peer's answer to what it just sent, short enough to leave the core to
// training threads.
constexpr auto kSpinWindow = microseconds(200);
constexpr auto kMinSleep = microseconds(20);
// Bound on every wait during shutdown.
constexpr auto kShutdownBound = std::chrono::seconds(10);

}  // namespace

Coordinator::Coordinator(const Config& config, Backend& backend, TensorQueue& queue)
    : config_(config), backend_(backend), queue_(queue), topo_(backend.topology()), table_(topo_.size) {}

Coordinator::~Coordinator() { join(); }

void Coordinator::start() {
  running_ = true;
  last_stall_check_ = Clock::now();
  thread_ = std::thread([this] { loop(); });
}

void Coordinator::request_shutdown() {
  shutdown_requested_ = true;
  queue_.notify();
}

void Coordinator::join() {
  if (thread_.joinable()) thread_.join();
}

void Coordinator::stop(const Status& reason) {
  queue_.close(reason);
  running_ = false;
}

void Coordinator::loop() {
  auto last_activity = Clock::now();
  const auto max_sleep = microseconds(static_cast<int64_t>(config_.cycle_time_ms * 1000.0));
  while (running_) {
    bool activity = false;
    Status s = topo_.rank == 0 ? root_cycle(&activity) : worker_cycle(&activity);
    if (!s.is_ok()) {
      KOLO_LOG(LogLevel::kError, "coordinator stopped: " << s.message());
      stop(s);
      break;
    }
    if (!running_) break;
    const auto now = Clock::now();
    if (activity) {
      last_activity = now;
      continue;
    }
    const auto idle = now - last_activity;
    if (idle < kSpinWindow) {
      std::this_thread::yield();
    } else {
      auto sleep = std::clamp(std::chrono::duration_cast<microseconds>(idle / 4), kMinSleep, max_sleep);
      queue_.wait_for_work(sleep);
    }
  }
}

Status Coordinator::root_cycle(bool* activity) {
  for (Request& q : queue_.take_requests()) {
    KOLO_RETURN_IF_ERROR(table_.add(q));
    *activity = true;
  }
  bool shutdown = shutdown_requested_.load();
  std::string reason = shutdown ? "kolo was shut down by rank 0 while this collective was pending" : "";
  for (;;) {
    int source = -1;
    bool got = false;
    std::vector<uint8_t> bytes;
    KOLO_RETURN_IF_ERROR(backend_.channel().poll_from_peers(&source, &bytes, &got));
    if (!got) break;
    *activity = true;
    RequestList list;
    KOLO_RETURN_IF_ERROR(decode(bytes.data(), bytes.size(), &list));
    for (const Request& q : list.requests) KOLO_RETURN_IF_ERROR(table_.add(q));
    if (list.shutdown && !shutdown) {
      shutdown = true;
      reason = "kolo was shut down by rank " + std::to_string(source) + " while this collective was pending";
    }
  }
  check_stalls(&shutdown, &reason);

  std::vector<Response> ready = table_.take_ready();
  if (!ready.empty() || shutdown) {
    ResponseList list;
    list.responses = fuse_responses(std::move(ready), config_.fusion_threshold_bytes);
    list.shutdown = shutdown;
    list.shutdown_reason = reason;
    if (topo_.size > 1) KOLO_RETURN_IF_ERROR(backend_.channel().send_to_all(encode(list)));
    KOLO_RETURN_IF_ERROR(execute_list(list));
    *activity = true;
    if (shutdown) {
      root_drain_acks();
      stop(Status::aborted(reason));
      return Status::ok();
    }
  }
  size_t in_flight = 0;
  return backend_.channel().progress(&in_flight);
}

Status Coordinator::worker_cycle(bool* activity) {
  RequestList out;
  out.requests = queue_.take_requests();
  if (shutdown_requested_ && !shutdown_sent_) {
    out.shutdown = true;
    shutdown_sent_ = true;
  }
  if (!out.requests.empty() || out.shutdown) {
    KOLO_RETURN_IF_ERROR(backend_.channel().send_to_root(encode(out)));
    *activity = true;
  }
  for (;;) {
    std::vector<uint8_t> bytes;
    bool got = false;
    KOLO_RETURN_IF_ERROR(backend_.channel().poll_from_root(&bytes, &got));
    if (!got) break;
    *activity = true;
    ResponseList list;
    KOLO_RETURN_IF_ERROR(decode(bytes.data(), bytes.size(), &list));
    KOLO_RETURN_IF_ERROR(execute_list(list));
    if (list.shutdown) {
      RequestList ack;
      ack.shutdown_ack = true;
      KOLO_RETURN_IF_ERROR(backend_.channel().send_to_root(encode(ack)));
      // Deliver what is queued (the ack included) before stopping; bounded.
      const auto deadline = Clock::now() + kShutdownBound;
      size_t in_flight = 1;
      while (in_flight && Clock::now() < deadline) {
        KOLO_RETURN_IF_ERROR(backend_.channel().progress(&in_flight));
        if (in_flight) std::this_thread::sleep_for(microseconds(50));
      }
      stop(Status::aborted(list.shutdown_reason));
      return Status::ok();
    }
  }
  size_t in_flight = 0;
  return backend_.channel().progress(&in_flight);
}

void Coordinator::root_drain_acks() {
  // Every peer answers the shutdown list with an ack, after which it sends nothing more;
  // messages before the ack are requests that will never run and are dropped.
  std::vector<bool> acked(topo_.size, false);
  int missing = topo_.size - 1;
  const auto deadline = Clock::now() + kShutdownBound;
  while (missing > 0 && Clock::now() < deadline) {
    int source = -1;
    bool got = false;
    std::vector<uint8_t> bytes;
    size_t in_flight = 0;
    if (!backend_.channel().poll_from_peers(&source, &bytes, &got).is_ok()) break;
    backend_.channel().progress(&in_flight);
    if (!got) {
      std::this_thread::sleep_for(microseconds(50));
      continue;
    }
    RequestList list;
    if (decode(bytes.data(), bytes.size(), &list).is_ok() && list.shutdown_ack && source > 0 &&
        source < topo_.size && !acked[source]) {
      acked[source] = true;
      --missing;
    }
  }
  if (missing > 0) KOLO_LOG(LogLevel::kWarning, missing << " rank(s) did not acknowledge shutdown within 10 s");
  size_t in_flight = 1;
  while (in_flight && Clock::now() < deadline) {
    if (!backend_.channel().progress(&in_flight).is_ok()) break;
    if (in_flight) std::this_thread::sleep_for(microseconds(50));
  }
}

void Coordinator::check_stalls(bool* shutdown, std::string* reason) {
  if (config_.stall_check_seconds <= 0 && config_.stall_shutdown_seconds <= 0) return;
  const auto now = Clock::now();
  if (now - last_stall_check_ < std::chrono::milliseconds(100)) return;
  last_stall_check_ = now;
  double threshold = config_.stall_check_seconds > 0 ? config_.stall_check_seconds : config_.stall_shutdown_seconds;
  if (config_.stall_shutdown_seconds > 0) threshold = std::min(threshold, config_.stall_shutdown_seconds);
  for (const auto& p : table_.stalled(threshold, now)) {
    std::string msg = std::string(op_kind_name(p.kind)) + " \"" + p.name + "\" was submitted by rank(s) " +
                      join_ranks(p.ready_ranks) + " but not by rank(s) " + join_ranks(p.missing_ranks) + " for " +
                      std::to_string(static_cast<int>(p.waited_seconds)) + " s";
    if (config_.stall_shutdown_seconds > 0 && p.waited_seconds >= config_.stall_shutdown_seconds) {
      if (!*shutdown) {
        *shutdown = true;
        *reason = "stall: " + msg + " (KOLO_STALL_SHUTDOWN_TIME_SECONDS=" +
                  std::to_string(config_.stall_shutdown_seconds) + ")";
        KOLO_LOG(LogLevel::kError, *reason);
      }
    } else if (config_.stall_check_seconds > 0 && p.waited_seconds >= config_.stall_check_seconds &&
               stall_reported_.insert(p.name).second) {
      KOLO_LOG(LogLevel::kWarning, "stall: " << msg);
    }
  }
}

Status Coordinator::execute_list(const ResponseList& list) {
  for (const Response& r : list.responses) execute_one(r);
  return Status::ok();
}

void Coordinator::execute_one(const Response& r) {
  std::vector<TensorEntry> entries;
  Status s = queue_.take_entries(r.names, &entries);
  if (!s.is_ok()) {
    KOLO_LOG(LogLevel::kError, s.message());
    return;
  }
  if (r.type == Response::Type::kError) {
    s = Status::mismatch(r.error);
  } else {
    Executor* chosen = nullptr;
    for (Executor* e : backend_.executors()) {
      if (e->accepts(r)) {
        chosen = e;
        break;
      }
    }
    s = chosen ? chosen->execute(r, entries)
               : Status::invalid_argument("\"" + r.names[0] + "\": no executor runs " + device_name(r.device) +
                                          " tensors in this build");
  }
  for (auto& e : entries) e.handle->complete(s);
}

}  // namespace kolo

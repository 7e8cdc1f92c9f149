// The public entry points of kolo/runtime.h and kolo/collectives.h: one process-wide
// runtime (config, backend, queue, coordinator), created by init() and torn down by
// shutdown() or at exit.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>
#include <memory>
#include <mutex>

#include "core/backend.h"
#include "core/coordinator.h"
#include "core/host_info.h"
#include "core/logging.h"
#include "core/tensor_queue.h"
#include "core/timeline.h"
#include "kolo/collectives.h"
#include "kolo/runtime.h"

namespace kolo {
namespace {

struct Runtime {
  Config config;
  std::unique_ptr<Backend> backend;
  TensorQueue queue;
  Timeline timeline;  // rank 0 only, when KOLO_TIMELINE is set
  std::unique_ptr<Coordinator> coordinator;
  Topology topo;
};

std::mutex g_mu;                    // serialises init/shutdown
std::unique_ptr<Runtime> g_runtime;  // guarded by g_mu for creation/destruction
bool g_finalized = false;            // guarded by g_mu: MPI cannot be initialised twice

void shutdown_at_exit() { kolo::shutdown(); }

void on_signal(int signo) { Coordinator::note_signal(signo); }

// SIGINT/SIGTERM: tell every rank why, then end as the signal would have. Only where the
// program left the default action in place: a program's own handler is respected.
void install_signal_handlers() {
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    sigaction(sig, nullptr, &old);
    if (old.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
}

std::terminate_handler g_previous_terminate = nullptr;

// An uncaught exception on this rank: tell the other ranks (their pending collectives fail
// naming this rank and the exception) before the process aborts, instead of leaving them to
// wait for a peer that is gone. Bounded: at most 3 s.
[[noreturn]] void on_terminate() {
  std::string what = "unknown exception";
  if (auto e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
  }
  Runtime* rt = g_runtime.get();
  if (rt && rt->coordinator && rt->coordinator->running()) {
    const std::string reason =
        "rank " + std::to_string(rt->topo.rank) + " ended with an uncaught exception: " + what;
    KOLO_LOG(LogLevel::kError, reason);
    rt->coordinator->request_shutdown(reason);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (rt->coordinator->running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (g_previous_terminate) g_previous_terminate();
  std::abort();
}

// The interface traffic between hosts leaves by, as far as this process can tell: kolo's own
// choice, Open MPI's TCP setting, or every non-loopback interface with an IPv4 address.
std::string interface_report(const Config& c) {
  auto with_address = [](const std::string& name) {
    const std::string a = interface_addresses(name);
    return name + "(" + (a.empty() ? "no IPv4 address" : a) + ")";
  };
  if (!c.network_interface.empty()) return with_address(c.network_interface) + ",from=KOLO_NETWORK_INTERFACE";
  if (const char* v = std::getenv("OMPI_MCA_btl_tcp_if_include"))
    return std::string(v) + ",from=OMPI_MCA_btl_tcp_if_include";
  std::string all;
  for (const auto& n : interface_names()) {
    if (n == "lo" || interface_addresses(n).empty()) continue;
    if (!all.empty()) all += "+";
    all += with_address(n);
  }
  if (all.empty()) all = "none";
  all += ",from=MPI-default";
  return all;
}

// KOLO_VERBOSE=1: one line per rank on stderr, key=value words (stable for scripts).
void print_verbose_report(const Runtime& rt) {
  const Topology& t = rt.topo;
  std::string line = "kolo verbose: rank=" + std::to_string(t.rank) + " size=" + std::to_string(t.size) +
                     " host=" + host_name() + " local_rank=" + std::to_string(t.local_rank) +
                     " local_size=" + std::to_string(t.local_size) + " host_index=" + std::to_string(t.cross_rank) +
                     " hosts=" + std::to_string(t.cross_size) + " " + rt.backend->describe_executors() +
                     " interface=" + interface_report(rt.config) + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

Runtime& runtime() {
  Runtime* r = g_runtime.get();
  if (!r) throw Error(Status::invalid_argument("kolo is not initialised: call kolo::init() first"));
  return *r;
}

Status validate(const TensorView& t, const std::string& name, const char* what) {
  // The message prefix is built only on failure: this runs for every submitted tensor.
  auto where = [&] { return std::string(what) + " \"" + name + "\": "; };
  if (name.empty()) return Status::invalid_argument(std::string(what) + ": the tensor name is empty");
  for (int64_t d : t.shape)
    if (d < 0)
      return Status::invalid_argument(where() + "shape " + shape_string(t.shape) + " has a negative dimension");
  if (static_cast<int>(t.dtype) >= kNumDTypes) return Status::invalid_argument(where() + "unknown dtype");
  if (t.data == nullptr && t.num_elements() > 0) return Status::invalid_argument(where() + "data pointer is null");
  return Status::ok();
}

// What a request's header says that this rank alone can judge: finite scale factors, a root
// that is a rank. Checked before queueing, the same for every executor.
Status validate_header(const Request& q, const std::string& name, int size) {
  auto where = [&] { return std::string(op_kind_name(q.kind)) + " \"" + name + "\": "; };
  auto finite = [](double v) { return v - v == 0.0; };  // false for NaN and ±inf
  if (q.kind == OpKind::kAllreduce && (!finite(q.prescale) || !finite(q.postscale)))
    return Status::invalid_argument(where() + "scale factors must be finite (prescale " + std::to_string(q.prescale) +
                                    ", postscale " + std::to_string(q.postscale) + ")");
  if (q.kind == OpKind::kBroadcast && (q.root < 0 || q.root >= size))
    return Status::invalid_argument(where() + "root " + std::to_string(q.root) + " is not a rank (ranks are 0.." +
                                    std::to_string(size - 1) + ")");
  return Status::ok();
}

// `req` is the request's header (kind, reduce op, root, scales); the queue fills in the rest.
Handle submit(const TensorView& t, const std::string& name, Request req) {
  auto state = std::make_shared<detail::HandleState>(name, req.kind);
  Handle h(state);
  Status s = validate(t, name, op_kind_name(req.kind).data());
  Runtime* rt = g_runtime.get();
  if (s.is_ok() && !rt) s = Status::invalid_argument("kolo is not initialised: call kolo::init() first");
  if (s.is_ok()) s = validate_header(req, name, rt->topo.size);
  if (!s.is_ok()) {
    state->complete(s);
    return h;
  }
  req.rank = rt->topo.rank;
  // The queue copies name, dtype, shape and device into its reused slot (no allocation).
  rt->queue.push(t, name, req, std::move(state));
  return h;
}

}  // namespace

void init() { init(nullptr, nullptr); }

void init(int* argc, char*** argv) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_runtime) return;
  if (g_finalized)
    throw Error(Status::invalid_argument("kolo::init() after kolo::shutdown(): MPI cannot be initialised twice"));
  auto rt = std::make_unique<Runtime>();
  throw_if_error(Config::from_env(&rt->config));
  throw_if_error(create_mpi_backend(rt->config, argc, argv, &rt->backend));
  rt->topo = rt->backend->topology();
  set_log_context(rt->config.log_level, rt->topo.rank);
  if (rt->config.verbose) print_verbose_report(*rt);
  for (const auto& n : Config::unknown_env_names())
    KOLO_LOG(LogLevel::kWarning, "ignoring unknown variable " << n << " (see docs/knobs.md for kolo's knobs)");
  if (!rt->config.timeline_path.empty() && rt->topo.rank == 0) {
    Status s = rt->timeline.open(rt->config.timeline_path, rt->config.timeline_mark_cycles);
    if (!s.is_ok()) {
      rt->backend->finalize();
      throw Error(s);
    }
  }
  rt->coordinator = std::make_unique<Coordinator>(rt->config, *rt->backend, rt->queue, &rt->timeline);
  rt->coordinator->start();
  static bool registered = false;
  if (!registered) {
    std::atexit(shutdown_at_exit);
    install_signal_handlers();
    g_previous_terminate = std::set_terminate(on_terminate);
    registered = true;
  }
  g_runtime = std::move(rt);
}

void shutdown() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_runtime) return;
  g_runtime->coordinator->request_shutdown();
  g_runtime->coordinator->join();
  g_runtime->queue.close(Status::aborted("kolo has been shut down"));
  g_runtime->coordinator.reset();
  g_runtime->timeline.close();
  g_runtime->backend->finalize();
  g_runtime.reset();
  g_finalized = true;
}

bool is_initialized() { return g_runtime != nullptr; }
int rank() { return runtime().topo.rank; }
int size() { return runtime().topo.size; }
int local_rank() { return runtime().topo.local_rank; }
int local_size() { return runtime().topo.local_size; }
int cross_rank() { return runtime().topo.cross_rank; }
int cross_size() { return runtime().topo.cross_size; }

RuntimeStats runtime_stats() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_runtime || !g_runtime->coordinator) return {};
  return g_runtime->coordinator->stats();
}

Handle allreduce_async(const TensorView& tensor, const std::string& name, const AllreduceOptions& o) {
  Request q;
  q.kind = OpKind::kAllreduce;
  q.reduce_op = o.op;
  q.prescale = o.prescale;
  q.postscale = o.postscale;
  return submit(tensor, name, std::move(q));
}

Handle allreduce_async(const TensorView& tensor, const std::string& name, ReduceOp op, double prescale,
                       double postscale) {
  return allreduce_async(tensor, name, AllreduceOptions{op, prescale, postscale});
}

void allreduce(const TensorView& tensor, const std::string& name, const AllreduceOptions& options) {
  synchronize(allreduce_async(tensor, name, options));
}

Handle broadcast_async(const TensorView& tensor, int root, const std::string& name) {
  Request q;
  q.kind = OpKind::kBroadcast;
  q.root = root;
  return submit(tensor, name, std::move(q));
}

void broadcast(const TensorView& tensor, int root, const std::string& name) {
  synchronize(broadcast_async(tensor, root, name));
}

Handle allgather_async(const TensorView& input, const std::string& name) {
  Request q;
  q.kind = OpKind::kAllgather;
  return submit(input, name, std::move(q));
}

Tensor allgather(const TensorView& input, const std::string& name) {
  Handle h = allgather_async(input, name);
  return h.gathered();
}

void barrier(const std::string& name) {
  int32_t token = 0;
  allreduce(TensorView::of(&token, {1}), name, AllreduceOptions{ReduceOp::kSum});
}

}  // namespace kolo

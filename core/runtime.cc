// The runtime's lifecycle (kolo/runtime.h): init() builds the one process-wide runtime
// (config, backend, queue, coordinator), shutdown() or the exit tears it down; signals and
// an uncaught exception tell the peers why this rank ends; the topology queries and the
// entry points of other files (core/runtime_access.h) pass the same gate as a submission.
// The globals and why each must exist: core/runtime_state.h. The collective entry points:
// core/collectives.cc.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "core/host_info.h"
#include "core/logging.h"
#include "core/runtime_access.h"
#include "core/runtime_state.h"
#include "kolo/runtime.h"

namespace kolo {
namespace detail {

// Written under g_mu; read without it by submissions.
std::unique_ptr<Runtime> g_runtime;    // guarded by g_mu for creation/destruction
std::atomic<bool> g_finalized{false};  // MPI cannot be initialised twice
std::atomic<int> g_submitting{0};
std::atomic<bool> g_closing{false};

Status shut_down() {
  return Status::invalid_argument("kolo has been shut down (kolo::shutdown() was called, or the program is exiting); "
                         "it cannot run collectives or be initialised again in this process");
}

Status no_runtime() {
  if (g_finalized.load(std::memory_order_relaxed) || g_closing.load(std::memory_order_relaxed)) return shut_down();
  return Status::invalid_argument("kolo is not initialised: call kolo::init() first");
}

Runtime& runtime() {
  Runtime* r = g_runtime.get();
  if (!r) throw Error(no_runtime());
  return *r;
}

}  // namespace detail

namespace {

using detail::g_closing;
using detail::g_finalized;
using detail::g_runtime;
using detail::g_submitting;
using detail::Runtime;
using detail::runtime;
using detail::shut_down;
using detail::Submitting;

std::mutex g_mu;  // serialises init/shutdown
// is_initialized(): set once the runtime runs, cleared as shutdown() begins (read by any thread).
std::atomic<bool> g_running{false};

// detail::add_before_finalize's hooks; g_hooks_mu also covers shutdown()'s run of them
// through MPI's finalize.
std::mutex g_hooks_mu;
std::map<int, std::function<void()>> g_hooks;
int g_next_hook = 0;

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
  if (!c.mpi_tcp_interfaces.empty()) return c.mpi_tcp_interfaces + ",from=OMPI_MCA_btl_tcp_if_include";
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

}  // namespace

void detail::init_runtime(int* argc, char*** argv, BackendFactory make_backend) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_runtime) return;
  if (g_finalized)
    throw Error(Status::invalid_argument("kolo::init() after kolo::shutdown(): MPI cannot be initialised twice"));
  auto rt = std::make_unique<Runtime>();
  if (Status s = Config::from_env(&rt->config); !s.is_ok())
    throw Error(Status::invalid_argument(s.message() + " (give it that form or unset it; docs/knobs.md lists every "
                                         "KOLO_* variable with its default)"));
  throw_if_error(make_backend(rt->config, argc, argv, &rt->backend));
  rt->topo = rt->backend->topology();
  set_log_context(rt->config.log_level, rt->topo.rank);
  if (rt->config.verbose) print_verbose_report(*rt);
  for (const auto& n : Config::unknown_env_names())
    KOLO_LOG(LogLevel::kWarning, "ignoring unknown variable " << n << " (see docs/knobs.md for kolo's knobs)");
  if (!rt->config.timeline_path.empty() && rt->topo.rank == 0) {
    Status s = rt->timeline.open(rt->config.timeline_path, rt->config.timeline_mark_cycles);
    if (!s.is_ok()) {
      rt->backend->finalize();
      throw Error(Status::invalid_argument("KOLO_TIMELINE: " + s.message()));
    }
  }
  rt->coordinator = std::make_unique<Coordinator>(rt->config, *rt->backend, rt->queue, &rt->timeline, &rt->sets);
  rt->coordinator->start();
  static bool registered = false;
  if (!registered) {
    std::atexit(shutdown_at_exit);
    install_signal_handlers();
    g_previous_terminate = std::set_terminate(on_terminate);
    registered = true;
  }
  g_runtime = std::move(rt);
  g_running.store(true, std::memory_order_release);
  // KOLO_PROCESS_SETS: registered as add_process_set does it (every rank agrees, ids 1, 2, ...).
  for (const auto& ranks : g_runtime->config.process_sets) detail::add_process_set_as(ranks, "KOLO_PROCESS_SETS");
}

void shutdown() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_runtime) return;
  // Submissions racing this call: those already inside finish their push (the queue's close
  // below fails what the coordinator has not run), later ones fail with the shutdown message.
  // Leases of other entry points (core/runtime_access.h) are waited for the same way.
  g_running.store(false, std::memory_order_release);
  g_closing.store(true, std::memory_order_seq_cst);
  while (g_submitting.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  g_runtime->coordinator->request_shutdown();
  g_runtime->coordinator->join();
  g_runtime->queue.close(Status::aborted("kolo has been shut down"));
  g_runtime->coordinator.reset();
  g_runtime->timeline.close();
  {
    std::lock_guard<std::mutex> hooks(g_hooks_mu);  // core/runtime_access.h
    for (auto& [id, hook] : g_hooks) hook();
    g_hooks.clear();
    g_runtime->backend->finalize();
  }
  g_runtime.reset();
  g_finalized = true;
}

bool is_initialized() { return g_running.load(std::memory_order_acquire); }

void start_timeline(const std::string& path, bool mark_cycles) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_runtime) throw Error(Status::invalid_argument("kolo::start_timeline: kolo is not running; call kolo::init() first"));
  if (path.empty()) throw Error(Status::invalid_argument("kolo::start_timeline: the path is empty"));
  if (g_runtime->topo.rank == 0) throw_if_error(g_runtime->timeline.open(path, mark_cycles));
}

void stop_timeline() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_runtime) g_runtime->timeline.close();
}
namespace {
// A topology query under the submission gate (as a submission): one racing shutdown() on
// another thread either reads the live runtime, which shutdown() waits for, or fails with
// the shutdown message; it never reads a runtime being destroyed.
template <class Field>
int topology(Field field) {
  Submitting in;
  if (g_closing.load(std::memory_order_seq_cst)) throw Error(shut_down());
  return field(runtime().topo);
}
}  // namespace

int rank() { return topology([](const Topology& t) { return t.rank; }); }
int size() { return topology([](const Topology& t) { return t.size; }); }
int local_rank() { return topology([](const Topology& t) { return t.local_rank; }); }
int local_size() { return topology([](const Topology& t) { return t.local_size; }); }
int cross_rank() { return topology([](const Topology& t) { return t.cross_rank; }); }
int cross_size() { return topology([](const Topology& t) { return t.cross_size; }); }

RuntimeStats runtime_stats() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_runtime || !g_runtime->coordinator) return {};
  return g_runtime->coordinator->stats();
}

namespace detail {

int add_before_finalize(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  g_hooks.emplace(++g_next_hook, std::move(hook));
  return g_next_hook;
}

void remove_before_finalize(int id, bool run) {
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  auto it = g_hooks.find(id);
  if (it == g_hooks.end()) return;
  if (run) it->second();
  g_hooks.erase(it);
}

// The submission gate, for entry points in other files (core/runtime_access.h).
RuntimeLease::RuntimeLease() {
  g_submitting.fetch_add(1, std::memory_order_seq_cst);
  Runtime* rt = g_closing.load(std::memory_order_seq_cst) ? nullptr : g_runtime.get();
  if (!rt) {
    g_submitting.fetch_sub(1, std::memory_order_release);
    throw Error(no_runtime());
  }
  access_ = RuntimeAccess{&rt->sets, &rt->queue, rt->topo.rank, rt->topo.size};
}

RuntimeLease::~RuntimeLease() { g_submitting.fetch_sub(1, std::memory_order_release); }

bool RuntimeLease::closing() { return g_closing.load(std::memory_order_acquire); }

Status RuntimeLease::shut_down_status() { return shut_down(); }

}  // namespace detail

}  // namespace kolo

// The public entry points of kolo/runtime.h and kolo/collectives.h: one process-wide
// runtime (config, backend, queue, coordinator), created by init() and torn down by
// shutdown() or at exit.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <thread>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>

#include "core/backend.h"
#include "core/coordinator.h"
#include "core/handle_state.h"
#include "core/host_info.h"
#include "core/logging.h"
#include "core/process_set.h"
#include "core/runtime_access.h"
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
  ProcessSetRegistry sets;  // before the coordinator, which borrows it
  std::unique_ptr<Coordinator> coordinator;
  Topology topo;
};

std::mutex g_mu;                    // serialises init/shutdown
std::unique_ptr<Runtime> g_runtime;  // guarded by g_mu for creation/destruction
// Written under g_mu; read without it by submissions, to say why there is no runtime.
std::atomic<bool> g_finalized{false};  // MPI cannot be initialised twice
// is_initialized(): set once the runtime runs, cleared as shutdown() begins (read by any thread).
std::atomic<bool> g_running{false};

// Submissions in progress, and whether shutdown() has begun. A submission enters (count
// first, then the flag: both sequentially consistent), so shutdown(), which sets the flag and
// then waits for the count to reach 0, either sees it and waits (a queue push is a short
// lock), or the submission sees the flag and fails with the shutdown message. Either way no
// submission touches a runtime being destroyed (docs/correctness.md, finding 5).
std::atomic<int> g_submitting{0};
std::atomic<bool> g_closing{false};

// detail::add_before_finalize's hooks; g_hooks_mu also covers shutdown()'s run of them
// through MPI's finalize.
std::mutex g_hooks_mu;
std::map<int, std::function<void()>> g_hooks;
int g_next_hook = 0;

class Submitting {
 public:
  Submitting() { g_submitting.fetch_add(1, std::memory_order_seq_cst); }
  ~Submitting() { g_submitting.fetch_sub(1, std::memory_order_release); }
  Submitting(const Submitting&) = delete;
  Submitting& operator=(const Submitting&) = delete;
};

// Set on a thread for the push of a blocking call (allreduce(), broadcast(), ...): that thread
// waits on the handle right after and, where waiters help (core/wait_help.h), runs the pass
// itself, so the push leaves the coordinator asleep. Waking it would put a third thread on
// the cores during the collective (docs/benchmarks.md, "A blocking call does not wake the
// coordinator"). A helper that leaves work behind wakes it (Coordinator::help).
thread_local bool t_waits_next = false;

class WaitsNext {
 public:
  WaitsNext() : outer_(t_waits_next) { t_waits_next = true; }
  ~WaitsNext() { t_waits_next = outer_; }
  WaitsNext(const WaitsNext&) = delete;
  WaitsNext& operator=(const WaitsNext&) = delete;

 private:
  bool outer_;
};

// Whether a push made now should wake the coordinator.
bool wake_on_push(const Runtime& rt) { return !(t_waits_next && rt.coordinator->waiters_help()); }

Status shut_down() {
  return Status::invalid_argument("kolo has been shut down (kolo::shutdown() was called, or the program is exiting); "
                         "it cannot run collectives or be initialised again in this process");
}

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

// Why there is no runtime: never initialised, or shut down (MPI cannot start again).
Status no_runtime() {
  if (g_finalized.load(std::memory_order_relaxed) || g_closing.load(std::memory_order_relaxed)) return shut_down();
  return Status::invalid_argument("kolo is not initialised: call kolo::init() first");
}

Runtime& runtime() {
  Runtime* r = g_runtime.get();
  if (!r) throw Error(no_runtime());
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

// What a request's header (and the tensor's dtype: the queue copies it into the request later)
// says that this rank alone can judge: finite scale factors, a root that is a rank, no average
// or scaling of bools. Checked before queueing, the same for every executor.
Status validate_header(const Request& q, DType dtype, const std::string& name, int size) {
  auto where = [&] { return std::string(op_kind_name(q.kind)) + " \"" + name + "\": "; };
  auto finite = [](double v) { return v - v == 0.0; };  // false for NaN and ±inf
  if ((q.kind == OpKind::kAllreduce || q.kind == OpKind::kReducescatter) &&
      (!finite(q.prescale) || !finite(q.postscale)))
    return Status::invalid_argument(where() + "scale factors must be finite (prescale " + std::to_string(q.prescale) +
                                    ", postscale " + std::to_string(q.postscale) + ")");
  if (dtype == DType::kBool && (q.kind == OpKind::kAllreduce || q.kind == OpKind::kReducescatter)) {
    if (q.reduce_op == ReduceOp::kAverage)
      return Status::invalid_argument(where() + "average of bool tensors is not defined; reduce them with sum or max "
                                      "(logical OR) or with product or min (logical AND)");
    if (q.prescale != 1.0 || q.postscale != 1.0)
      return Status::invalid_argument(where() + "bool tensors cannot be scaled (prescale " + std::to_string(q.prescale) +
                                      ", postscale " + std::to_string(q.postscale) + ")");
  }
  if (q.kind == OpKind::kBroadcast && (q.root < 0 || q.root >= size))
    return Status::invalid_argument(where() + "root " + std::to_string(q.root) + " is not a rank (ranks are 0.." +
                                    std::to_string(size - 1) + ")");
  return Status::ok();
}

// An alltoall's splits against this rank's own rows, over `ranks` ranks (the set's size):
// what rank 0's negotiation would find too (core/negotiation.cc, note_splits; the same
// words), judged here so that the fault is this rank's own refusal (an invalid argument, as
// Horovod's enqueue reports it) and travels to the peers.
Status check_alltoall_rows(const TensorView& t, const Request& q, const std::string& name, int rank, size_t ranks) {
  const std::string who = "alltoall \"" + name + "\": rank " + std::to_string(rank) + " ";
  if (t.shape.empty()) return Status::invalid_argument(who + "sent a scalar (alltoall needs a first dimension to split)");
  const int64_t rows = t.shape[0];
  const auto n = static_cast<int64_t>(ranks);
  if (q.splits.empty()) {
    if (rows % n == 0) return Status::ok();
    return Status::invalid_argument(who + "asked for an even split of " + std::to_string(rows) + " rows, which " +
                                    std::to_string(n) + " ranks do not divide");
  }
  if (q.splits.size() != ranks)
    return Status::invalid_argument(who + "gave " + std::to_string(q.splits.size()) + " splits " +
                                    shape_string(q.splits) + " for " + std::to_string(n) + " ranks");
  int64_t sum = 0;
  for (int64_t v : q.splits) {
    if (v < 0) return Status::invalid_argument(who + "gave a negative split in " + shape_string(q.splits));
    sum += v;
  }
  if (sum == rows) return Status::ok();
  return Status::invalid_argument(who + "gave splits " + shape_string(q.splits) + " that add up to " +
                                  std::to_string(sum) + " rows, but its first dimension is " + std::to_string(rows));
}

// A collective on a process set: the set is registered and active here, and this rank is in
// it. A refusal here stays on this rank: the set's members do not expect this rank.
Status check_membership(const Request& q, int rank, const std::string& name, const Runtime& rt,
                        std::optional<std::vector<int>>* members) {
  auto where = [&] { return std::string(op_kind_name(q.kind)) + " \"" + name + "\": "; };
  bool active = false;
  auto ranks = rt.sets.ranks(q.process_set, &active);
  if (!ranks || !active)
    return Status::invalid_argument(where() + "process set " + std::to_string(q.process_set) +
                                    " is not registered (it was removed, or kolo::add_process_set has not returned)");
  if (!std::binary_search(ranks->begin(), ranks->end(), rank))
    return Status::invalid_argument(where() + "rank " + std::to_string(rank) + " is not in " +
                                    describe_process_set(q.process_set, *ranks) +
                                    "; only its members may submit collectives on it");
  *members = std::move(ranks);
  return Status::ok();
}

// What a submission on a process set this rank is a member of may still get wrong alone.
Status check_set_root(const Request& q, const std::string& name, const std::vector<int>& members) {
  if (q.kind != OpKind::kBroadcast || std::binary_search(members.begin(), members.end(), q.root))
    return Status::ok();
  return Status::invalid_argument(std::string(op_kind_name(q.kind)) + " \"" + name + "\": root " +
                                  std::to_string(q.root) + " is not in " + describe_process_set(q.process_set, members) +
                                  " (a broadcast root is a job rank, and must be a member)");
}

// Everything about one submission this rank can judge alone; `rt` is set when the runtime
// runs. `refusal` may carry a fault the caller found first (empty alltoall splits, an output
// that cannot hold the input). *tell_peers says whether the fault goes to the peers as a
// refused request (Request::refused): so it does whenever the collective's members would
// otherwise wait for this rank -- not for an empty name, a runtime that is not running, or a
// set this rank is not a member of.
Status check_submission(const TensorView& t, const std::string& name, const Request& req, Runtime** rt,
                        bool* tell_peers, Status refusal = Status::ok()) {
  *tell_peers = false;
  if (name.empty()) return validate(t, name, op_kind_name(req.kind).data());
  Status local = refusal.is_ok() ? validate(t, name, op_kind_name(req.kind).data()) : std::move(refusal);
  if (g_closing.load(std::memory_order_seq_cst)) return local.is_ok() ? shut_down() : local;  // after Submitting's count
  *rt = g_runtime.get();
  if (!*rt) return local.is_ok() ? no_runtime() : local;
  std::optional<std::vector<int>> members;
  if (req.process_set != 0) KOLO_RETURN_IF_ERROR(check_membership(req, (*rt)->topo.rank, name, **rt, &members));
  if (local.is_ok()) local = validate_header(req, t.dtype, name, (*rt)->topo.size);
  if (local.is_ok() && members) local = check_set_root(req, name, *members);
  if (local.is_ok() && req.kind == OpKind::kAlltoall)
    local = check_alltoall_rows(t, req, name, (*rt)->topo.rank,
                                members ? members->size() : static_cast<size_t>((*rt)->topo.size));
  *tell_peers = !local.is_ok();
  return local;
}

// What a refused submission queues in its place: no data, and the tensor's dtype and shape
// where they are valid (the peers' messages quote them).
TensorView stand_in(const TensorView& t) {
  TensorView v;
  v.device = t.device;
  if (static_cast<int>(t.dtype) < kNumDTypes) v.dtype = t.dtype;
  if (std::none_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 0; })) v.shape = t.shape;
  return v;
}

// `req` is the request's header (kind, reduce op, root, scales); the queue fills in the rest.
// `into`: an alltoall's output in the caller's memory (checked against the received rows
// when the collective runs: prepare_alltoall_output); `into_error`: why it cannot be used,
// found here (HandleState::into_error). `refusal`: a fault the caller found (check_submission).
// A refused submission that its peers would wait for is queued as a stand-in
// (Request::refused): the handle then fails once rank 0 has failed the name on every rank.
Handle submit(const TensorView& t, const std::string& name, Request req, const TensorView* into = nullptr,
              Status into_error = Status::ok(), Status refusal = Status::ok()) {
  auto state = detail::make_handle_state(name, req.kind);
  Handle h(state);
  Submitting in;  // until the push: shutdown() waits for it
  Runtime* rt = nullptr;
  bool tell_peers = false;
  if (Status s = check_submission(t, name, req, &rt, &tell_peers, std::move(refusal)); !s.is_ok()) {
    if (!tell_peers) {
      state->complete(s);
      return h;
    }
    req.rank = rt->topo.rank;
    req.refused = s.message();
    rt->queue.push(stand_in(t), name, req, std::move(state), wake_on_push(*rt));
    return h;
  }
  if (into != nullptr) {
    detail::HandleExtra& x = state->extra();
    x.into = *into;
    x.has_into = true;
    x.into_error = std::move(into_error);
  }
  req.rank = rt->topo.rank;
  // The queue copies name, dtype, shape and device into its reused slot (no allocation).
  rt->queue.push(t, name, req, std::move(state), wake_on_push(*rt));
  return h;
}

// A group: every member is checked before any is queued. A bad member fails the whole group:
// on this rank with its reason, and on the peers through stand-ins for every member (as for
// a single tensor), unless the fault stays local (an empty name, no runtime, not a member).
Handle submit_group(const std::vector<TensorView>& ts, const std::string& name, Request req) {
  std::vector<std::shared_ptr<detail::HandleState>> members;
  auto group = detail::make_group_state(name, req.kind, ts.size(), &members);
  Handle h(group);
  if (ts.empty()) return h;
  Submitting in;  // until the push: shutdown() waits for it
  Runtime* rt = nullptr;
  bool tell_peers = !name.empty();
  Status s = name.empty() ? Status::invalid_argument("grouped " + std::string(op_kind_name(req.kind)) +
                                                     ": the group name is empty")
                          : Status::ok();
  for (size_t i = 0; i < ts.size() && s.is_ok(); ++i)
    s = check_submission(ts[i], members[i]->name, req, &rt, &tell_peers);
  if (!s.is_ok() && !tell_peers) {
    for (auto& m : members) m->complete(s);
    return h;
  }
  req.rank = rt->topo.rank;
  req.group = name;
  req.group_size = static_cast<int32_t>(ts.size());
  if (!s.is_ok()) {
    req.refused = s.message();
    std::vector<TensorView> stand_ins;
    for (const TensorView& t : ts) stand_ins.push_back(stand_in(t));
    rt->queue.push_group(stand_ins, req, &members, wake_on_push(*rt));
    return h;
  }
  // All members or none (two threads submitting one group name at once: one group runs).
  rt->queue.push_group(ts, req, &members, wake_on_push(*rt));
  return h;
}

// Out-of-place forms: `output` must be able to hold `input`; the copy happens here.
Status copy_for_out_of_place(const TensorView& input, const TensorView& output, const std::string& name,
                             const char* what) {
  auto where = [&] { return std::string(what) + " \"" + name + "\": "; };
  KOLO_RETURN_IF_ERROR(validate(input, name, what));
  KOLO_RETURN_IF_ERROR(validate(output, name, what));
  if (!input.device.is_cpu() || !output.device.is_cpu())
    return Status::invalid_argument(where() + "the out-of-place form takes CPU tensors only (input on " +
                                    device_name(input.device) + ", output on " + device_name(output.device) +
                                    "); use the in-place form on GPU tensors");
  if (input.dtype != output.dtype || input.num_elements() != output.num_elements())
    return Status::invalid_argument(where() + "output " + std::string(dtype_name(output.dtype)) +
                                    shape_string(output.shape) + " cannot hold input " +
                                    std::string(dtype_name(input.dtype)) + shape_string(input.shape));
  if (input.data != output.data && input.num_bytes() > 0) std::memmove(output.data, input.data, input.num_bytes());
  return Status::ok();
}

// An explicit split list must name every rank: an empty one would read as the even split.
Status check_splits_given(const std::vector<int64_t>& splits, const std::string& name) {
  if (!splits.empty()) return Status::ok();
  return Status::invalid_argument("alltoall \"" + name +
                                  "\": splits is empty; pass one split per rank, or call the even-split form "
                                  "(no splits argument)");
}

Request reduce_request(OpKind kind, const AllreduceOptions& o) {
  Request q;
  q.kind = kind;
  q.reduce_op = o.op;
  q.prescale = o.prescale;
  q.postscale = o.postscale;
  q.process_set = o.process_set.id();
  return q;
}

// A request header of `kind` on `set`.
Request set_request(OpKind kind, const ProcessSet& set) {
  Request q;
  q.kind = kind;
  q.process_set = set.id();
  return q;
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

Handle allreduce_async(const TensorView& tensor, const std::string& name, const AllreduceOptions& o) {
  return submit(tensor, name, reduce_request(OpKind::kAllreduce, o));
}

Handle allreduce_async(const TensorView& tensor, const std::string& name, ReduceOp op, double prescale,
                       double postscale) {
  return allreduce_async(tensor, name, AllreduceOptions{op, prescale, postscale});
}

void allreduce(const TensorView& tensor, const std::string& name, const AllreduceOptions& options) {
  WaitsNext waits;
  synchronize(allreduce_async(tensor, name, options));
}

Handle broadcast_async(const TensorView& tensor, int root, const std::string& name, const ProcessSet& set) {
  Request q = set_request(OpKind::kBroadcast, set);
  q.root = root;
  return submit(tensor, name, std::move(q));
}

void broadcast(const TensorView& tensor, int root, const std::string& name, const ProcessSet& set) {
  WaitsNext waits;
  synchronize(broadcast_async(tensor, root, name, set));
}

Handle allgather_async(const TensorView& input, const std::string& name, const ProcessSet& set) {
  return submit(input, name, set_request(OpKind::kAllgather, set));
}

Tensor allgather(const TensorView& input, const std::string& name, const ProcessSet& set) {
  WaitsNext waits;
  Handle h = allgather_async(input, name, set);
  return std::move(h).output();  // allgather: the same tensor as gathered(), moved out
}

// The out-of-place forms' faults are refusals like any other (submit's `refusal`): the peers
// fail the collective too.
Handle allreduce_async(const TensorView& input, const TensorView& output, const std::string& name,
                       const AllreduceOptions& options) {
  Status s = copy_for_out_of_place(input, output, name, "allreduce");
  return submit(output, name, reduce_request(OpKind::kAllreduce, options), nullptr, Status::ok(), std::move(s));
}

void allreduce(const TensorView& input, const TensorView& output, const std::string& name,
               const AllreduceOptions& options) {
  WaitsNext waits;
  synchronize(allreduce_async(input, output, name, options));
}

Handle broadcast_async(const TensorView& input, const TensorView& output, int root, const std::string& name,
                       const ProcessSet& set) {
  Status s = copy_for_out_of_place(input, output, name, "broadcast");
  Request q = set_request(OpKind::kBroadcast, set);
  q.root = root;
  return submit(output, name, std::move(q), nullptr, Status::ok(), std::move(s));
}

void broadcast(const TensorView& input, const TensorView& output, int root, const std::string& name,
               const ProcessSet& set) {
  WaitsNext waits;
  synchronize(broadcast_async(input, output, root, name, set));
}

Handle alltoall_async(const TensorView& input, const std::vector<int64_t>& splits, const std::string& name,
                      const ProcessSet& set) {
  Request q = set_request(OpKind::kAlltoall, set);
  q.splits = splits;
  return submit(input, name, std::move(q), nullptr, Status::ok(), check_splits_given(splits, name));
}

Handle alltoall_async(const TensorView& input, const std::string& name, const ProcessSet& set) {
  return submit(input, name, set_request(OpKind::kAlltoall, set));
}

Tensor alltoall(const TensorView& input, const std::vector<int64_t>& splits, const std::string& name,
                std::vector<int64_t>* received_splits, const ProcessSet& set) {
  WaitsNext waits;
  Handle h = alltoall_async(input, splits, name, set);
  if (received_splits) *received_splits = h.received_splits();
  return std::move(h).output();
}

Tensor alltoall(const TensorView& input, const std::string& name, const ProcessSet& set) {
  WaitsNext waits;
  return alltoall_async(input, name, set).output();
}

namespace {
// The output forms' checks this rank makes alone, at submit. Whatever fails here, the rank
// still takes part in the exchange (submit's into_error): refusing to submit would leave its
// peers waiting for it. Only the room for the rows received is checked when the collective
// runs (prepare_alltoall_output).
// The output form's refusal of tensors off the CPU.
Status cpu_only(const TensorView& input, const TensorView& output, const std::string& name) {
  return Status::invalid_argument("alltoall \"" + name + "\": the form with an output takes CPU tensors only (input on " +
                                  device_name(input.device) + ", output on " + device_name(output.device) + ")");
}

Status check_alltoall_into(const TensorView& input, const TensorView& output, const std::string& name) {
  const std::string where = "alltoall \"" + name + "\": ";
  if (static_cast<int>(output.dtype) >= kNumDTypes)
    return Status::invalid_argument(where + "output has an unknown dtype");
  const std::string out = "output " + std::string(dtype_name(output.dtype)) + shape_string(output.shape) + " ";
  if (std::any_of(output.shape.begin(), output.shape.end(), [](int64_t d) { return d < 0; }))
    return Status::invalid_argument(where + out + "has a negative dimension");
  if (output.data == nullptr && output.num_elements() > 0)
    return Status::invalid_argument(where + out + "has a null data pointer");
  if (!input.device.is_cpu() || !output.device.is_cpu()) return cpu_only(input, output, name);
  if (output.shape.empty())
    return Status::invalid_argument(where + "output is a scalar (it needs a first dimension)");
  const std::string in = "input " + std::string(dtype_name(input.dtype)) + shape_string(input.shape);
  if (output.dtype != input.dtype) return Status::invalid_argument(where + out + "has another dtype than " + in);
  if (!input.shape.empty() &&  // a scalar input fails in negotiation, on every rank
      (output.shape.size() != input.shape.size() ||
       !std::equal(input.shape.begin() + 1, input.shape.end(), output.shape.begin() + 1)))
    return Status::invalid_argument(where + out + "does not match " + in + " beyond the first dimension");
  const auto* o = static_cast<const char*>(output.data);
  const auto* i = static_cast<const char*>(input.data);
  if (output.num_bytes() > 0 && input.num_bytes() > 0 && o < i + input.num_bytes() && i < o + output.num_bytes())
    return Status::invalid_argument(where + out + "overlaps the " + in);
  return Status::ok();
}

// Submits the output form: with `output` when it passed check_alltoall_into, else with why not.
// An invalid input fails at once, as in every other form.
// An input off the CPU cannot take part in this CPU form at all: that, and `refusal`, are
// refusals (submit), which fail the collective on every rank.
Handle submit_into(const TensorView& input, const TensorView& output, const std::string& name, Request q,
                   Status refusal = Status::ok()) {
  if (refusal.is_ok() && !input.device.is_cpu()) refusal = cpu_only(input, output, name);
  Status s = validate(input, name, "alltoall").is_ok() ? check_alltoall_into(input, output, name) : Status::ok();
  return submit(input, name, std::move(q), &output, std::move(s), std::move(refusal));
}
}  // namespace

Handle alltoall_async(const TensorView& input, const TensorView& output, const std::vector<int64_t>& splits,
                      const std::string& name, const ProcessSet& set) {
  Request q = set_request(OpKind::kAlltoall, set);
  q.splits = splits;
  return submit_into(input, output, name, std::move(q), check_splits_given(splits, name));
}

Handle alltoall_async(const TensorView& input, const TensorView& output, const std::string& name,
                      const ProcessSet& set) {
  return submit_into(input, output, name, set_request(OpKind::kAlltoall, set));
}

void alltoall(const TensorView& input, const TensorView& output, const std::vector<int64_t>& splits,
              const std::string& name, std::vector<int64_t>* received_splits, const ProcessSet& set) {
  WaitsNext waits;  // this thread waits next: the push need not wake the coordinator
  Handle h = alltoall_async(input, output, splits, name, set);
  synchronize(h);
  if (received_splits) *received_splits = h.received_splits();
}

void alltoall(const TensorView& input, const TensorView& output, const std::string& name, const ProcessSet& set) {
  WaitsNext waits;
  synchronize(alltoall_async(input, output, name, set));
}

Handle reducescatter_async(const TensorView& input, const std::string& name, const AllreduceOptions& o) {
  return submit(input, name, reduce_request(OpKind::kReducescatter, o));
}

Tensor reducescatter(const TensorView& input, const std::string& name, const AllreduceOptions& o) {
  WaitsNext waits;
  return reducescatter_async(input, name, o).output();
}

int64_t reducescatter_rows(int64_t dim0, int size, int rank, int64_t* first_row) {
  const int64_t base = dim0 / size, extra = dim0 % size;
  if (first_row) *first_row = base * rank + std::min<int64_t>(rank, extra);
  return base + (rank < extra ? 1 : 0);
}

Handle grouped_allreduce_async(const std::vector<TensorView>& tensors, const std::string& name,
                               const AllreduceOptions& o) {
  return submit_group(tensors, name, reduce_request(OpKind::kAllreduce, o));
}

void grouped_allreduce(const std::vector<TensorView>& tensors, const std::string& name, const AllreduceOptions& o) {
  WaitsNext waits;
  synchronize(grouped_allreduce_async(tensors, name, o));
}

Handle grouped_allgather_async(const std::vector<TensorView>& inputs, const std::string& name, const ProcessSet& set) {
  return submit_group(inputs, name, set_request(OpKind::kAllgather, set));
}

std::vector<Tensor> grouped_allgather(const std::vector<TensorView>& inputs, const std::string& name,
                                      const ProcessSet& set) {
  WaitsNext waits;
  return grouped_allgather_async(inputs, name, set).outputs();
}

Handle grouped_reducescatter_async(const std::vector<TensorView>& inputs, const std::string& name,
                                   const AllreduceOptions& o) {
  return submit_group(inputs, name, reduce_request(OpKind::kReducescatter, o));
}

std::vector<Tensor> grouped_reducescatter(const std::vector<TensorView>& inputs, const std::string& name,
                                          const AllreduceOptions& o) {
  WaitsNext waits;
  return grouped_reducescatter_async(inputs, name, o).outputs();
}

std::string auto_name(OpKind kind, const std::source_location& site) {
  static std::mutex mu;
  static std::map<std::tuple<int, std::string, uint32_t, uint32_t>, uint64_t> counts;
  const char* file = site.file_name();
  if (const char* slash = std::strrchr(file, '/')) file = slash + 1;
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(mu);
    n = counts[{static_cast<int>(kind), std::string(site.file_name()), site.line(), site.column()}]++;
  }
  return "kolo.auto." + std::string(op_kind_name(kind)) + "." + file + ":" + std::to_string(site.line()) + ":" +
         std::to_string(site.column()) + "." + std::to_string(n);
}

Handle allreduce_async(const TensorView& tensor, const AllreduceOptions& options, CallSite site) {
  return allreduce_async(tensor, auto_name(OpKind::kAllreduce, site), options);
}
void allreduce(const TensorView& tensor, const AllreduceOptions& options, CallSite site) {
  allreduce(tensor, auto_name(OpKind::kAllreduce, site), options);
}
Handle broadcast_async(const TensorView& tensor, int root, CallSite site) {
  return broadcast_async(tensor, root, auto_name(OpKind::kBroadcast, site));
}
void broadcast(const TensorView& tensor, int root, CallSite site) {
  broadcast(tensor, root, auto_name(OpKind::kBroadcast, site));
}
Handle allgather_async(const TensorView& input, CallSite site) {
  return allgather_async(input, auto_name(OpKind::kAllgather, site));
}
Tensor allgather(const TensorView& input, CallSite site) { return allgather(input, auto_name(OpKind::kAllgather, site)); }
Handle alltoall_async(const TensorView& input, const std::vector<int64_t>& splits, CallSite site) {
  return alltoall_async(input, splits, auto_name(OpKind::kAlltoall, site));
}
Handle alltoall_async(const TensorView& input, CallSite site) {
  return alltoall_async(input, auto_name(OpKind::kAlltoall, site));
}
Handle reducescatter_async(const TensorView& input, const AllreduceOptions& options, CallSite site) {
  return reducescatter_async(input, auto_name(OpKind::kReducescatter, site), options);
}
Tensor reducescatter(const TensorView& input, const AllreduceOptions& options, CallSite site) {
  return reducescatter(input, auto_name(OpKind::kReducescatter, site), options);
}
Handle grouped_allreduce_async(const std::vector<TensorView>& tensors, const AllreduceOptions& options,
                               CallSite site) {
  return grouped_allreduce_async(tensors, auto_name(OpKind::kAllreduce, site), options);
}

Handle join_async() {
  auto state = detail::make_handle_state("kolo.join", OpKind::kAllreduce);
  state->extra().is_join = true;
  Handle h(state);
  {
    Submitting in;  // until the push: shutdown() waits for it
    if (g_closing.load(std::memory_order_seq_cst)) throw Error(shut_down());
    runtime().queue.push_join(state);
  }
  return h;
}

int join() { return join_async().last_joined_rank(); }

void barrier(const std::string& name, const ProcessSet& set) {
  int32_t token = 0;
  allreduce(TensorView::of(&token, {1}), name, AllreduceOptions{ReduceOp::kSum, 1.0, 1.0, set});
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

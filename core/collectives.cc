// The collective entry points of kolo/collectives.h: each checks what this rank can judge
// alone and queues the request for the coordinator, behind the submission gate
// (core/runtime_state.h). The runtime's lifecycle: core/runtime.cc.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>

#include "core/handle_state.h"
#include "core/runtime_state.h"
#include "kolo/collectives.h"

namespace kolo {
namespace {

using detail::g_closing;
using detail::g_runtime;
using detail::no_runtime;
using detail::Runtime;
using detail::runtime;
using detail::shut_down;
using detail::Submitting;

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
    if (Status s = runtime().queue.push_join(state); !s.is_ok()) throw Error(s);
  }
  return h;
}

int join() { return join_async().last_joined_rank(); }

void barrier(const std::string& name, const ProcessSet& set) {
  int32_t token = 0;
  allreduce(TensorView::of(&token, {1}), name, AllreduceOptions{ReduceOp::kSum, 1.0, 1.0, set});
}

}  // namespace kolo

// The public process-set API (kolo/process_set.h). Adding and removing a set are agreed by
// every rank through one allgather on the global set, so they go through the same
// negotiation, stall inspector and dead-peer checks as any collective, and a disagreement
// fails on every rank alike (docs/collectives.md, "Process sets").
#include <algorithm>

#include "core/negotiation.h"
#include "core/process_set.h"
#include "core/runtime_access.h"
#include "kolo/collectives.h"
#include "kolo/process_set.h"
#include "kolo/runtime.h"
#include "kolo/status.h"

namespace kolo {
namespace {

// Every rank's `row` (any length), by rank: one allgather of [length, row...] on the global
// set under `name`.
std::vector<std::vector<int32_t>> exchange(const std::vector<int32_t>& row, const std::string& name, int size) {
  std::vector<int32_t> mine;
  mine.reserve(row.size() + 1);
  mine.push_back(static_cast<int32_t>(row.size()));
  mine.insert(mine.end(), row.begin(), row.end());
  const Tensor all = allgather(TensorView::of(mine), name);
  const int32_t* p = all.data<int32_t>();
  const size_t n = all.bytes.size() / sizeof(int32_t);
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(size));
  size_t at = 0;
  for (auto& r : rows) {
    if (at >= n || p[at] < 0 || at + 1 + static_cast<size_t>(p[at]) > n)
      throw Error(Status::internal(name + ": malformed exchange (internal error in kolo)"));
    r.assign(p + at + 1, p + at + 1 + p[at]);
    at += 1 + static_cast<size_t>(p[at]);
  }
  return rows;
}

std::string list_text(std::vector<int32_t>::const_iterator b, std::vector<int32_t>::const_iterator e) {
  std::string s = "[";
  for (auto it = b; it != e; ++it) s += (it == b ? "" : ",") + std::to_string(*it);
  return s + "]";
}

// Throws on every rank alike when the rows differ: `text` renders one rank's row.
template <class F>
void require_agreement(const std::vector<std::vector<int32_t>>& rows, const std::string& what, const char* attribute,
                       F&& text) {
  std::vector<std::string> values;
  for (const auto& r : rows) values.push_back(text(r));
  const std::string d = describe_disagreement(attribute, values);
  if (!d.empty())
    throw Error(Status::invalid_argument(what +
                                         ": every rank must make the same call (the same arguments, in the "
                                         "same order of calls); the ranks differ: " +
                                         d));
}

}  // namespace

// Each touch of the registry holds a RuntimeLease, and none is held across the exchange (a
// collective: shutdown() waits for leases before it stops the coordinator). A call racing
// kolo::shutdown() thus completes or fails with the shutdown message; it never touches a
// registry being destroyed (docs/correctness.md, finding 20).
namespace detail {

int32_t add_process_set_as(const std::vector<int>& ranks, const std::string& what) {
  int size = 0;
  int32_t id = 0;
  Status local;
  {
    const RuntimeLease rt;
    size = rt->size;
    std::vector<int> sorted;
    local = check_process_set_ranks(ranks, size, what, &sorted);
    // Reserved before the exchange: a peer may submit to the set as soon as its own call
    // returns, and rank 0 must then know the set. Every rank reserves (ids stay in step) even
    // for ranks it refuses; an empty reservation negotiates nothing.
    id = rt->sets->reserve(local.is_ok() ? sorted : std::vector<int>{});
  }
  std::vector<int32_t> row{id, local.is_ok() ? 1 : 0};
  row.insert(row.end(), ranks.begin(), ranks.end());
  try {
    const auto rows = exchange(row, "kolo.process_set.add", size);
    require_agreement(rows, what, "ranks", [](const std::vector<int32_t>& r) {
      if (r.size() < 2) return std::string("?");
      return list_text(r.begin() + 2, r.end()) + " as set " + std::to_string(r[0]);
    });
    throw_if_error(local);  // the same error on every rank: they all passed these ranks
  } catch (...) {
    try {
      const RuntimeLease rt;
      rt->sets->erase(id);
    } catch (const Error&) {  // shutting down: the registry goes with the runtime
    }
    throw;
  }
  const RuntimeLease rt;  // the shutdown message if shutdown() began since the exchange
  rt->sets->activate(id);
  return id;
}

}  // namespace detail

ProcessSet add_process_set(const std::vector<int>& ranks) {
  const int32_t id = detail::add_process_set_as(ranks, "kolo::add_process_set");
  const detail::RuntimeLease rt;
  auto members = rt->sets->ranks(id);
  return ProcessSet(id, members ? *members : std::vector<int>{});
}

void remove_process_set(const ProcessSet& set) {
  const int32_t id = set.id();
  bool registered = false;
  int32_t pending = 0;
  int size = 0;
  {
    const detail::RuntimeLease rt;
    size = rt->size;
    bool active = false;
    registered = id != 0 && rt->sets->ranks(id, &active) && active;
    pending = registered ? static_cast<int32_t>(rt->queue->pending_in_set(id)) : 0;
  }
  const std::string what = "kolo::remove_process_set(process set " + std::to_string(id) + ")";
  const auto rows = exchange({id, registered ? 1 : 0, pending}, "kolo.process_set.remove", size);
  require_agreement(rows, what, "set", [](const std::vector<int32_t>& r) {
    return r.empty() ? std::string("?") : "id " + std::to_string(r[0]);
  });
  if (id == 0) throw Error(Status::invalid_argument(what + ": the global set cannot be removed"));
  std::vector<int> missing, busy;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].size() != 3 || rows[r][1] == 0)
      missing.push_back(static_cast<int>(r));
    else if (rows[r][2] > 0)
      busy.push_back(static_cast<int>(r));
  }
  if (!missing.empty())
    throw Error(Status::invalid_argument(what + ": no such set is registered on rank(s) " + join_ranks(missing)));
  if (!busy.empty())
    throw Error(Status::invalid_argument(what + ": rank(s) " + join_ranks(busy) +
                                         " still have collectives on it in flight; wait for them first"));
  const detail::RuntimeLease rt;
  rt->sets->erase(id);
}

std::vector<ProcessSet> process_sets() {
  std::vector<ProcessSet> out{ProcessSet{}};
  const detail::RuntimeLease rt;
  for (auto& [id, ranks] : rt->sets->active_sets()) out.push_back(ProcessSet(id, ranks));
  return out;
}

std::vector<int> ProcessSet::ranks() const {
  if (id_ != 0) return ranks_;
  std::vector<int> all(static_cast<size_t>(kolo::size()));
  for (size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int>(r);
  return all;
}

int ProcessSet::rank() const {
  if (id_ == 0) return kolo::rank();
  auto it = std::lower_bound(ranks_.begin(), ranks_.end(), kolo::rank());
  return it != ranks_.end() && *it == kolo::rank() ? static_cast<int>(it - ranks_.begin()) : -1;
}

int ProcessSet::size() const { return id_ == 0 ? kolo::size() : static_cast<int>(ranks_.size()); }

}  // namespace kolo

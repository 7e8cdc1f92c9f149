// Rank 0's negotiation table (see core/negotiation.h).
#include "core/negotiation.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace kolo {
namespace {


std::string rank_list(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + join_ranks(ranks);
}

std::string number(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

std::string quoted(const Request& q) {
  return std::string(op_kind_name(q.kind)) + " \"" + q.name + "\"";
}

}  // namespace

std::string join_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ranks[i]);
  }
  return s;
}

std::string describe_disagreement(const char* attribute, const std::vector<std::string>& values,
                                  const std::vector<int>& labels) {
  // Group ranks by value, in order of first appearance (so rank 0's value leads).
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < static_cast<int>(values.size()); ++r) {
    const int label = labels.empty() ? r : labels[static_cast<size_t>(r)];
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == values[r]; });
    if (it == groups.end()) groups.push_back({values[r], {label}});
    else it->second.push_back(label);
  }
  if (groups.size() <= 1) return "";
  std::string s = std::string(attribute) + " " + groups[0].first + " on " + rank_list(groups[0].second);
  for (size_t g = 1; g < groups.size(); ++g)
    s += (g == 1 ? " but " : " and ") + groups[g].first + " on " + rank_list(groups[g].second);
  return s;
}

MessageTable::MessageTable(int world_size) : size_(world_size), joined_(static_cast<size_t>(world_size), false) {}

MessageTable::MessageTable(int32_t process_set, std::vector<int> members)
    : size_(static_cast<int>(members.size())),
      members_(std::move(members)),
      set_id_(process_set),
      joined_(members_.size(), false) {}

int MessageTable::index_of(int rank) const {
  if (members_.empty()) return rank >= 0 && rank < size_ ? rank : -1;
  auto it = std::lower_bound(members_.begin(), members_.end(), rank);
  return it != members_.end() && *it == rank ? static_cast<int>(it - members_.begin()) : -1;
}

bool MessageTable::covered(const Slot& slot) const {
  if (slot.count == size_) return true;
  if (num_joined_ == 0) return false;
  int n = slot.count;
  for (int r = 0; r < size_; ++r)
    if (joined_[r] && !slot.have[r]) ++n;
  return n == size_;
}

void MessageTable::mark_if_complete(uint32_t index, Slot& slot) {
  // Group members complete with their group (release_group_if_ready).
  if (slot.done || !slot.first.group.empty() || !covered(slot)) return;
  slot.done = true;
  completed_.push_back(index);
  if (slot.first.kind == OpKind::kAllreduce)
    ready_bytes_ += static_cast<size_t>(num_elements(slot.first.shape)) * dtype_size(slot.first.dtype);
}

bool MessageTable::pending_ranks(const std::string& name, std::vector<int>* job_ranks, std::vector<int>* missing) const {
  const int64_t i = slots_.find(name);
  if (i < 0) return false;
  const Slot& slot = slots_.value(static_cast<uint32_t>(i));
  if (slot.done || !slot.first.group.empty()) return false;
  job_ranks->clear();
  if (missing) missing->clear();
  for (int r = 0; r < size_; ++r) {
    if (slot.have[r])
      job_ranks->push_back(global(r));
    else if (missing && !joined_[static_cast<size_t>(r)])
      missing->push_back(global(r));
  }
  return true;
}

void MessageTable::fail_pending(const std::string& name, const std::string& message, const std::vector<int>& owed) {
  const int64_t i = slots_.find(name);
  if (i < 0) return;
  Slot& slot = slots_.value(static_cast<uint32_t>(i));
  if (slot.done || !slot.first.group.empty()) return;
  if (slot.poison.empty()) slot.poison = message;
  slot.done = true;
  slot.early = true;
  completed_.push_back(static_cast<uint32_t>(i));
  std::vector<int> debtors;
  for (int r : owed) {
    const int k = index_of(r);
    if (k >= 0 && !slot.have[static_cast<size_t>(k)]) debtors.push_back(r);
  }
  if (debtors.empty()) return;
  // A rank that owed an earlier failed round of this name and still does keeps that debt:
  // its next request settles the older round first (its requests arrive in order).
  Owed& o = owed_[name];
  for (int r : debtors)
    if (std::find(o.ranks.begin(), o.ranks.end(), r) == o.ranks.end()) o.ranks.push_back(r);
  if (o.message.empty()) o.message = slot.poison;
}

bool MessageTable::settle_owed(const Request& q, int job_rank) {
  auto it = owed_.find(q.name);
  if (it == owed_.end()) return false;
  std::vector<int>& ranks = it->second.ranks;
  auto r = std::find(ranks.begin(), ranks.end(), job_rank);
  if (r == ranks.end()) return false;
  ranks.erase(r);
  Response e;
  e.type = Response::Type::kError;
  e.names = {q.name};
  e.process_set = set_id_;
  e.error = it->second.message;
  e.ranks = {job_rank};
  settled_.push_back(std::move(e));
  if (ranks.empty()) owed_.erase(it);
  return true;
}

Status MessageTable::join(int rank) {
  if (rank < 0 || rank >= size_) return Status::internal("join from unknown rank " + std::to_string(rank));
  if (joined_[rank])
    return Status::internal("rank " + std::to_string(rank) + " joined twice in one round (internal error in kolo's protocol)");
  joined_[rank] = true;
  ++num_joined_;
  last_joined_ = rank;
  // Names the other ranks are waiting on may now be complete. Slot order: rank 0 alone
  // decides, so any order is the same for everyone.
  slots_.for_each_in_use([&](uint32_t index) { mark_if_complete(index, slots_.value(index)); });
  std::vector<std::string> groups;
  for (const auto& [name, g] : groups_) groups.push_back(name);
  for (const std::string& name : groups) release_group_if_ready(name);
  return Status::ok();
}

void MessageTable::reset_join() {
  joined_.assign(static_cast<size_t>(size_), false);
  num_joined_ = 0;
  last_joined_ = -1;
}

namespace {

// Whether `b` agrees with `a` on everything negotiation checks: decided without building any
// text (the descriptive comparison runs only on disagreement).
bool agrees(const Request& a, const Request& b) {
  if (a.kind != b.kind || a.dtype != b.dtype || a.device.kind != b.device.kind || a.group != b.group ||
      a.group_size != b.group_size)
    return false;
  switch (a.kind) {
    case OpKind::kReducescatter:
    case OpKind::kAllreduce:
      return a.reduce_op == b.reduce_op && a.shape == b.shape && a.prescale == b.prescale &&
             a.postscale == b.postscale;
    case OpKind::kBroadcast: return a.root == b.root && a.shape == b.shape;
    case OpKind::kAllgather:
    case OpKind::kAlltoall:
      return a.shape.size() == b.shape.size() && !a.shape.empty() &&
             std::equal(a.shape.begin() + 1, a.shape.end(), b.shape.begin() + 1);
  }
  return false;
}

std::string numbers(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

Status MessageTable::add(const Request& q, int job_rank, Clock::time_point now, bool* first) {
  const int rank = index_of(job_rank);  // position in the set: what the slots count by
  if (rank < 0)
    return Status::internal("request for \"" + q.name + "\" from rank " + std::to_string(job_rank) +
                            (members_.empty() ? ", which is not a rank of the job" : ", which is not in its process set"));
  if (!owed_.empty() && q.group.empty() && settle_owed(q, job_rank)) {
    if (first) *first = false;
    return Status::ok();
  }
  bool inserted = false;
  const uint32_t index = slots_.acquire(q.name, &inserted);
  if (first) *first = inserted;
  Slot& slot = slots_.value(index);
  if (inserted) {
    // A reused slot: reset what the last collective of this name left (capacity stays).
    slot.have.assign(static_cast<size_t>(size_), false);
    slot.odd.clear();
    slot.first_dims.clear();
    slot.matrix.clear();
    slot.splits_error.clear();
    slot.count = 0;
    slot.done = false;
    slot.early = false;
    slot.group_run = 0;
    slot.group_error.clear();
    slot.poison.clear();
    slot.refusal.clear();
    slot.refused_by.clear();
    slot.first_seen = now;
  }
  if (slot.have[rank]) {
    // A rank's queue holds a name until its collective completed there, and that needs this
    // round's response: a second request of one rank in one round is a protocol fault. It
    // fails this round on every rank (the first request stays counted), not the job.
    if (slot.poison.empty())
      slot.poison = quoted(q) + ": rank " + std::to_string(job_rank) +
                    " sent two requests for one round (internal error in kolo's protocol)";
    return Status::ok();
  }
  if (joined_[rank] && slot.poison.empty())
    slot.poison = quoted(q) + ": rank " + std::to_string(job_rank) +
                  " submitted it after calling kolo::join() (a rank that joined takes part with no data "
                  "until every rank has joined)";
  slot.have[rank] = true;
  if (!q.refused.empty()) {
    if (slot.refusal.empty()) slot.refusal = q.refused;
    slot.refused_by.push_back(job_rank);
  }
  if (slot.count == 0) {
    slot.first = q;
    slot.first.rank = job_rank;
  } else if (!agrees(slot.first, q)) {
    slot.odd.emplace_back(rank, q);
    slot.odd.back().second.rank = job_rank;
  }
  if ((q.kind == OpKind::kAllgather || q.kind == OpKind::kAlltoall) && !q.shape.empty()) {
    if (slot.first_dims.empty()) slot.first_dims.assign(static_cast<size_t>(size_), 0);
    slot.first_dims[rank] = q.shape[0];
  }
  if (q.kind == OpKind::kAlltoall) note_splits(q, rank, slot);
  ++slot.count;
  if (!q.group.empty()) {
    // Held until the whole group is ready on every rank (release_group_if_ready).
    note_group_member(q, rank, index, inserted);
    release_group_if_ready(q.group);
  } else {
    mark_if_complete(index, slot);
  }
  return Status::ok();
}

void MessageTable::note_splits(const Request& q, int rank, Slot& slot) const {
  if (slot.matrix.empty()) slot.matrix.assign(static_cast<size_t>(size_) * static_cast<size_t>(size_), 0);
  const auto bad = [&](const std::string& why) {
    slot.splits_error +=
        (slot.splits_error.empty() ? "" : "; ") + std::string("rank ") + std::to_string(global(rank)) + " " + why;
  };
  if (q.shape.empty()) return bad("sent a scalar (alltoall needs a first dimension to split)");
  const int64_t rows = q.shape[0];
  int64_t* row = slot.matrix.data() + static_cast<size_t>(rank) * static_cast<size_t>(size_);
  if (q.splits.empty()) {
    if (rows % size_ != 0)
      return bad("asked for an even split of " + std::to_string(rows) + " rows, which " + std::to_string(size_) +
                 " ranks do not divide");
    std::fill(row, row + size_, rows / size_);
    return;
  }
  if (q.splits.size() != static_cast<size_t>(size_))
    return bad("gave " + std::to_string(q.splits.size()) + " splits " + numbers(q.splits) + " for " +
               std::to_string(size_) + " ranks");
  int64_t sum = 0;
  for (int64_t v : q.splits) {
    if (v < 0) return bad("gave a negative split in " + numbers(q.splits));
    sum += v;
  }
  if (sum != rows)
    return bad("gave splits " + numbers(q.splits) + " that add up to " + std::to_string(sum) +
               " rows, but its first dimension is " + std::to_string(rows));
  std::copy(q.splits.begin(), q.splits.end(), row);
}

void MessageTable::note_group_member(const Request& q, int rank, uint32_t index, bool fresh_slot) {
  Group& g = groups_[q.group];
  if (g.size_by_rank.empty()) {
    g.size_by_rank.assign(static_cast<size_t>(size_), -1);
    g.seen_by_rank.assign(static_cast<size_t>(size_), 0);
  }
  if (g.size_by_rank[rank] < 0 || q.group_size < g.size_by_rank[rank]) g.size_by_rank[rank] = q.group_size;
  ++g.seen_by_rank[rank];
  if (fresh_slot) g.members.push_back(index);
}

// A group is released once every rank has sent all the members it announced. When the ranks
// announced the same size (the normal case) every member is then complete; when they did
// not, the members only some ranks sent are released too, as errors, so nothing is left
// pending on any rank.
void MessageTable::release_group_if_ready(const std::string& name) {
  auto it = groups_.find(name);
  Group& g = it->second;
  // A rank that joined (kolo::join()) without submitting any member counts as ready.
  for (int r = 0; r < size_; ++r) {
    if (g.size_by_rank[r] < 0 && joined_[r]) continue;
    if (g.size_by_rank[r] < 0 || g.seen_by_rank[r] < g.size_by_rank[r]) return;
  }
  std::sort(g.members.begin(), g.members.end(), [&](uint32_t a, uint32_t b) {
    return slots_.value(a).first.name.size() != slots_.value(b).first.name.size()
               ? slots_.value(a).first.name.size() < slots_.value(b).first.name.size()
               : slots_.value(a).first.name < slots_.value(b).first.name;
  });
  Slot& head = slots_.value(g.members.front());
  head.group_run = g.members.size();
  // Ranks that joined without submitting take the group as the others announced it.
  int32_t announced = -1;
  for (int32_t v : g.size_by_rank) announced = std::max(announced, v);
  std::vector<std::string> sizes;
  for (int32_t v : g.size_by_rank) sizes.push_back(std::to_string(v < 0 ? announced : v));
  const std::string d = describe_disagreement("group size", sizes, members_);
  if (!d.empty())
    head.group_error = "grouped " + std::string(op_kind_name(head.first.kind)) + " \"" + name + "\": " + d;
  for (uint32_t index : g.members) {
    slots_.value(index).done = true;
    completed_.push_back(index);
  }
  groups_.erase(it);
}

void MessageTable::note_agreed(const Agreed& agreed, const Request& q, const Response& r) {
  if (agreed.cache->has_name(q.name)) agreed.cache->remember(q, &r.sizes);
  else if (!agreed.cache->full()) agreed.fresh->push_back(q);
}

void MessageTable::take_ready(FusionPlanner* planner, const Agreed* agreed) {
  for (Response& e : settled_) planner->add(std::move(e));
  settled_.clear();
  for (size_t k = 0; k < completed_.size();) {
    const uint32_t index = completed_[k];
    if (slots_.value(index).group_run > 0) {
      k += take_group(k, planner, agreed);
      continue;
    }
    build(slots_.name(index), slots_.value(index), &scratch_);
    if (agreed && scratch_.type != Response::Type::kError) note_agreed(*agreed, slots_.value(index).first, scratch_);
    planner->add(scratch_);
    slots_.release(index);
    ++k;
  }
  completed_.clear();
  ready_bytes_ = 0;
}

// All members of a group in one run, in member order; if any member cannot run (or the ranks
// disagree on the group), every member fails with the message naming the member at fault.
size_t MessageTable::take_group(size_t k, FusionPlanner* planner, const Agreed* agreed) {
  Slot& head = slots_.value(completed_[k]);
  const size_t n = head.group_run;
  std::string error = head.group_error;
  std::vector<Response> members(n);
  for (size_t i = 0; i < n; ++i) {
    Slot& slot = slots_.value(completed_[k + i]);
    const std::string& name = slots_.name(completed_[k + i]);
    if (!covered(slot)) {  // every rank submitted it or joined
      if (error.empty())
        error = "grouped " + std::string(op_kind_name(slot.first.kind)) + " \"" + slot.first.group + "\": member \"" +
                name + "\" was not submitted by every rank";
      members[i].names = {name};
      members[i].process_set = set_id_;
      continue;
    }
    build(name, slot, &members[i]);
    if (error.empty() && members[i].type == Response::Type::kError)
      error = "grouped " + std::string(op_kind_name(slot.first.kind)) + " \"" + slot.first.group +
              "\" failed: member \"" + name + "\": " + members[i].error;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!error.empty()) {
      members[i].type = Response::Type::kError;
      members[i].sizes.clear();
      members[i].error = error;
    }
    if (agreed && members[i].type != Response::Type::kError)
      note_agreed(*agreed, slots_.value(completed_[k + i]).first, members[i]);
    planner->add(std::move(members[i]));
    slots_.release(completed_[k + i]);
  }
  return n;
}

std::vector<Response> MessageTable::take_ready() {
  FusionPlanner unfused(0);  // threshold 0: every response stays on its own
  take_ready(&unfused);
  return unfused.take();
}

void MessageTable::build(const std::string& name, Slot& slot, Response* out) const {
  const Request& first = slot.first;
  Response& r = *out;
  r.names.resize(1);
  r.names[0] = name;
  r.process_set = set_id_;
  copy_op_fields(first, &r);
  r.error.clear();
  r.ranks.clear();
  r.sizes.resize(1);
  r.joined.clear();
  r.row_shape.clear();
  if (num_joined_ > 0)
    for (int rk = 0; rk < size_; ++rk)
      if (joined_[rk] && !slot.have[rk]) r.joined.push_back(rk);

  if (!slot.poison.empty() || !slot.refused_by.empty()) {
    r.type = Response::Type::kError;
    r.sizes.clear();
    // A refusal comes before any disagreement: the stand-in's fields are not the caller's.
    // The refusing ranks' handles fail with their own text (Request::refused).
    if (slot.poison.empty()) {
      std::vector<int> by = slot.refused_by;
      std::sort(by.begin(), by.end());
      r.error = slot.refusal + "; refused on " + rank_list(by) + " when submitted, so the collective fails on every rank";
    } else {
      r.error = slot.poison;
    }
    if (slot.early)  // failed before every rank was heard from: only the counted ranks' handles fail
      for (int rk = 0; rk < size_; ++rk)
        if (slot.have[rk]) r.ranks.push_back(global(rk));
    return;
  }
  if (!r.joined.empty()) {
    const std::string what = std::string(op_kind_name(first.kind)) + " \"" + name + "\": ";
    r.type = Response::Type::kError;
    r.sizes.clear();
    if (!first.device.is_cpu()) {
      r.error = what + "rank(s) " + join_ranks(std::vector<int>(r.joined.begin(), r.joined.end())) +
                " have joined (kolo::join()), and joined ranks take part in CPU collectives only";
      return;
    }
    if (horovod_join_ && (first.kind == OpKind::kAllgather || first.kind == OpKind::kBroadcast)) {
      r.error = what + "rank(s) " + join_ranks(std::vector<int>(r.joined.begin(), r.joined.end())) +
                " have joined (kolo::join()), and under Horovod's join rules (KOLO_JOIN_RULES=horovod) "
                "joined ranks take part in allreduce only";
      return;
    }
    if (first.kind == OpKind::kAlltoall || first.kind == OpKind::kReducescatter) {
      r.error = what + "rank(s) " + join_ranks(std::vector<int>(r.joined.begin(), r.joined.end())) +
                " have joined (kolo::join()), and joined ranks take part in allreduce, allgather and broadcast only";
      return;
    }
    if (first.kind == OpKind::kAllreduce && first.prescale != 1.0 && first.reduce_op != ReduceOp::kSum &&
        first.reduce_op != ReduceOp::kAverage) {
      r.error = what + "rank(s) " + join_ranks(std::vector<int>(r.joined.begin(), r.joined.end())) +
                " have joined (kolo::join()); with joined ranks a prescale applies to sum and average only";
      return;
    }
    if (first.kind == OpKind::kBroadcast && std::binary_search(r.joined.begin(), r.joined.end(), first.root)) {
      r.error = what + "the root, rank " + std::to_string(first.root) +
                ", has joined (kolo::join()) and has no data to broadcast";
      return;
    }
    r.sizes.resize(1);
    if (first.kind == OpKind::kAllgather && !first.shape.empty())
      r.row_shape.assign(first.shape.begin() + 1, first.shape.end());
  }
  if (slot.odd.empty()) {
    switch (first.kind) {
      case OpKind::kAllreduce:
        r.type = Response::Type::kAllreduce;
        r.sizes[0] = num_elements(first.shape);
        return;
      case OpKind::kBroadcast:
        if (index_of(first.root) < 0) break;  // the descriptive path explains
        r.type = Response::Type::kBroadcast;
        r.root = index_of(first.root);
        r.sizes[0] = num_elements(first.shape);
        return;
      case OpKind::kAllgather:
        r.type = Response::Type::kAllgather;
        r.sizes = slot.first_dims;
        return;
      case OpKind::kReducescatter:
        if (first.shape.empty()) break;  // the descriptive path explains
        r.type = Response::Type::kReducescatter;
        r.sizes[0] = num_elements(first.shape);
        return;
      case OpKind::kAlltoall:
        if (!slot.splits_error.empty()) {
          r.type = Response::Type::kError;
          r.sizes.clear();
          r.error = "alltoall \"" + name + "\": " + slot.splits_error;
          return;
        }
        r.type = Response::Type::kAlltoall;
        r.sizes = slot.matrix;
        return;
    }
  }
  // Disagreement (or a bad root): rebuild every rank's request to describe it.
  // Ranks that agree with the first differ from it at most in allgather's first dimension.
  std::vector<Request> reqs(static_cast<size_t>(size_), first);
  for (int rk = 0; rk < size_; ++rk)
    if (!slot.first_dims.empty() && !reqs[rk].shape.empty()) reqs[rk].shape[0] = slot.first_dims[rk];
  for (auto& [rank, q] : slot.odd) reqs[static_cast<size_t>(rank)] = q;
  r.sizes.clear();
  r = describe(name, reqs, std::move(r));
}

Response MessageTable::describe(const std::string& name, const std::vector<Request>& reqs, Response r) const {
  const Request& first = reqs[0];
  auto fail = [&](const std::string& what) {
    r.type = Response::Type::kError;
    r.error = what;
    return r;
  };
  // Compare one attribute across ranks; the first that differs becomes the error.
  auto check = [&](const char* attribute, auto&& text_of) -> std::string {
    std::vector<std::string> values;
    values.reserve(reqs.size());
    for (const Request& q : reqs) values.push_back(text_of(q));
    std::string d = describe_disagreement(attribute, values, members_);
    return d.empty() ? d : "\"" + name + "\": " + d;
  };
  // Kind first: when ranks call different collectives nothing else is comparable.
  std::string d = check("collective", [](const Request& q) { return std::string(op_kind_name(q.kind)); });
  if (!d.empty()) return fail(d);
  const std::string prefix(op_kind_name(first.kind));
  auto fail_prefixed = [&](const std::string& m) { return fail(prefix + " " + m); };

  d = check("dtype", [](const Request& q) { return std::string(dtype_name(q.dtype)); });
  if (!d.empty()) return fail_prefixed(d);
  d = check("device", [](const Request& q) { return q.device.is_cpu() ? std::string("cpu") : std::string("gpu"); });
  if (d.empty()) d = check("group", [](const Request& q) { return q.group.empty() ? "(none)" : "\"" + q.group + "\""; });
  if (d.empty()) d = check("group size", [](const Request& q) { return std::to_string(q.group_size); });
  if (!d.empty()) return fail_prefixed(d);

  switch (first.kind) {
    case OpKind::kAllreduce:
      d = check("reduce op", [](const Request& q) { return std::string(reduce_op_name(q.reduce_op)); });
      if (d.empty()) d = check("shape", [](const Request& q) { return shape_string(q.shape); });
      if (d.empty()) d = check("prescale", [](const Request& q) { return number(q.prescale); });
      if (d.empty()) d = check("postscale", [](const Request& q) { return number(q.postscale); });
      if (!d.empty()) return fail_prefixed(d);
      r.type = Response::Type::kAllreduce;
      r.sizes = {num_elements(first.shape)};
      return r;
    case OpKind::kBroadcast:
      d = check("root", [](const Request& q) { return std::to_string(q.root); });
      if (d.empty()) d = check("shape", [](const Request& q) { return shape_string(q.shape); });
      if (!d.empty()) return fail_prefixed(d);
      if (index_of(first.root) < 0)
        return fail_prefixed("\"" + name + "\": root " + std::to_string(first.root) +
                             (members_.empty() ? " is not a rank (size " + std::to_string(size_) + ")"
                                               : " is not in the process set"));
      r.type = Response::Type::kBroadcast;
      r.root = index_of(first.root);
      r.sizes = {num_elements(first.shape)};
      return r;
    case OpKind::kAllgather: {
      d = check("rank (number of dimensions)", [](const Request& q) { return std::to_string(q.shape.size()); });
      if (d.empty())
        d = check("shape beyond the first dimension", [](const Request& q) {
          return shape_string(Shape(q.shape.begin() + (q.shape.empty() ? 0 : 1), q.shape.end()));
        });
      if (!d.empty()) return fail_prefixed(d);
      if (first.shape.empty()) return fail_prefixed("\"" + name + "\": needs at least one dimension to gather along");
      r.type = Response::Type::kAllgather;
      for (const Request& q : reqs) r.sizes.push_back(q.shape[0]);
      return r;
    }
    case OpKind::kReducescatter:
      d = check("reduce op", [](const Request& q) { return std::string(reduce_op_name(q.reduce_op)); });
      if (d.empty()) d = check("shape", [](const Request& q) { return shape_string(q.shape); });
      if (d.empty()) d = check("prescale", [](const Request& q) { return number(q.prescale); });
      if (d.empty()) d = check("postscale", [](const Request& q) { return number(q.postscale); });
      if (!d.empty()) return fail_prefixed(d);
      if (first.shape.empty()) return fail_prefixed("\"" + name + "\": needs at least one dimension to scatter along");
      r.type = Response::Type::kReducescatter;
      r.sizes = {num_elements(first.shape)};
      return r;
    case OpKind::kAlltoall:
      d = check("rank (number of dimensions)", [](const Request& q) { return std::to_string(q.shape.size()); });
      if (d.empty())
        d = check("shape beyond the first dimension", [](const Request& q) {
          return shape_string(Shape(q.shape.begin() + (q.shape.empty() ? 0 : 1), q.shape.end()));
        });
      if (!d.empty()) return fail_prefixed(d);
      if (first.shape.empty()) return fail_prefixed("\"" + name + "\": needs at least one dimension to split along");
      return fail_prefixed("\"" + name + "\": the ranks' requests differ in a way kolo cannot describe (internal)");
  }
  return fail("\"" + name + "\": unknown collective");
}

std::vector<MessageTable::Pending> MessageTable::stalled(double min_wait_seconds, Clock::time_point now) const {
  std::vector<Pending> out;
  if (num_incomplete() == 0) return out;  // the common case: no scan of the reused slots
  slots_.for_each_in_use([&](uint32_t index) {
    const Slot& slot = slots_.value(index);
    double waited = std::chrono::duration<double>(now - slot.first_seen).count();
    if (waited < min_wait_seconds || slot.done || slot.count == size_) return;
    Pending p{slots_.name(index), slot.first.kind, {}, {}, waited};
    for (int r = 0; r < size_; ++r) {
      if (slot.have[r] || joined_[r]) {
        p.ready_ranks.push_back(global(r));
      } else {
        p.missing_ranks.push_back(global(r));
      }
    }
    out.push_back(std::move(p));
  });
  std::sort(out.begin(), out.end(), [](const Pending& a, const Pending& b) { return a.name < b.name; });
  return out;
}

}  // namespace kolo

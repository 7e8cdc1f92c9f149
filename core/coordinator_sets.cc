// The coordinator's process sets (docs/collectives.md, "Process sets"): each set's message
// table, its members as the registry knows them, the one response list shared by all sets,
// a name in flight on two sets at once, the first rendezvous of a set's members, and each
// set's response cache.
#include <algorithm>
#include <string_view>
#include <utility>

#include "core/coordinator.h"
#include "core/fusion.h"

namespace kolo {

using Clock = std::chrono::steady_clock;

// A rank runs one collective per name at a time, so a set holding q.name pending cannot
// complete while a rank it waits for holds the name pending on another set that cannot
// complete. Start from every set with the name pending and drop, until nothing changes, each
// set none of whose missing ranks holds the name pending on another set still in the group.
// Each set left waits for a rank held by another set left, so none of them can ever complete,
// whatever any rank submits later (the first to complete would need a rank that another one
// still holds). Each fails now, on every rank that submitted it (docs/correctness.md,
// finding 21). Sound as far as the tables are: a name on the fast path's board is not in
// them, so a cycle through it is not seen (it stalls as before); nothing is failed that could
// still complete.
void Coordinator::fail_cross_set(const Request& q) {
  struct Pending {
    int32_t id;
    MessageTable* table;
    std::vector<int> have, missing;
  };
  std::vector<Pending> group;
  const auto collect = [&](int32_t id, MessageTable* t) {
    Pending p{id, t, {}, {}};
    if (t->pending_ranks(q.name, &p.have, &p.missing)) group.push_back(std::move(p));
  };
  collect(0, &table_);
  for (auto& [id, t] : set_tables_) collect(id, t.get());
  for (bool changed = group.size() >= 2; changed;) {
    changed = false;
    for (size_t i = 0; i < group.size(); ++i) {
      const auto held_elsewhere = [&](int r) {
        for (size_t k = 0; k < group.size(); ++k)
          if (k != i && std::binary_search(group[k].have.begin(), group[k].have.end(), r)) return true;
        return false;
      };
      const std::vector<int>& m = group[i].missing;
      if (std::any_of(m.begin(), m.end(), held_elsewhere)) continue;
      group.erase(group.begin() + static_cast<std::ptrdiff_t>(i));
      changed = true;
      break;
    }
  }
  if (group.size() < 2) return;
  const auto set_text = [&](int32_t id) {
    const std::vector<int>* m = id == 0 ? nullptr : set_members(id);
    return m == nullptr ? std::string("the global process set") : describe_process_set(id, *m);
  };
  std::string why = std::string(op_kind_name(q.kind)) + " \"" + q.name + "\": submitted on ";
  for (size_t i = 0; i < group.size(); ++i) {
    const Pending& p = group[i];
    why += (i == 0 ? "" : i + 1 == group.size() ? " and on " : ", on ") + set_text(p.id) + " by rank" +
           (p.have.size() > 1 ? "s " : " ") + join_ranks(p.have) + " (waiting for " + join_ranks(p.missing) + ")";
  }
  why += "; each set waits for a rank that has the name in flight on another of them (a rank runs one collective "
         "per name at a time), so all fail. Use one name per process set";
  // A missing rank that holds the name on another set of the group spent its round there;
  // every other missing rank owes this set's round a request (in flight, or still to come),
  // which fails on arrival instead of pairing with the peers' next round of the name.
  for (size_t i = 0; i < group.size(); ++i) {
    std::vector<int> owed;
    for (int r : group[i].missing) {
      bool held = false;
      for (size_t k = 0; k < group.size() && !held; ++k)
        held = k != i && std::binary_search(group[k].have.begin(), group[k].have.end(), r);
      if (!held) owed.push_back(r);
    }
    group[i].table->fail_pending(q.name, why, owed);
  }
}

MessageTable* Coordinator::table_for(int32_t id) {
  if (id == 0) return &table_;
  if (auto it = set_tables_.find(id); it != set_tables_.end()) return it->second.get();
  const std::vector<int>* members = set_members(id);
  if (members == nullptr || members->empty()) return nullptr;  // empty: refused by add_process_set
  return set_tables_.emplace(id, std::make_unique<MessageTable>(id, *members)).first->second.get();
}

std::vector<Response> Coordinator::take_ready_all(Status* status) {
  // Negotiated tensors go straight into the fusion plan (no Response per fused tensor); the
  // planner fuses only within a set. One list for all sets: every rank sees every set's
  // responses in one order, and each set's members execute the same subsequence of it,
  // which is what keeps sets that overlap in time from deadlocking each other.
  FusionPlanner planner(fusion_threshold_);
  table_.take_ready(&planner);
  set_agreed_.clear();
  for (auto& [id, table] : set_tables_) {
    const MessageTable::Agreed agreed{&set_cache(id), &set_agreed_};
    table->take_ready(&planner, cache_.enabled() ? &agreed : nullptr);
  }
  for (Response& e : orphans_) planner.add(std::move(e));
  orphans_.clear();
  std::vector<Response> ready = planner.take();
  for (Response& r : ready)
    if (r.type == Response::Type::kError && r.process_set != 0)
      if (const std::vector<int>* m = set_members(r.process_set))
        r.error += " [on " + describe_process_set(r.process_set, *m) + "]";
  if (!set_agreed_.empty()) *status = remember_emitted(ready);
  return ready;
}

ResponseCache& Coordinator::set_cache(int32_t id) {
  auto it = set_caches_.find(id);
  if (it == set_caches_.end()) it = set_caches_.emplace(id, ResponseCache(config_.cache_capacity, id)).first;
  return it->second;
}

void Coordinator::add_for_root(const Request& q, RequestList* out) {
  if (q.process_set == 0) {
    if (auto id = cache_.find_for_root(q)) return out->cached.push_back(*id);
  } else if (auto c = set_caches_.find(q.process_set); c != set_caches_.end()) {
    if (auto id = c->second.find_for_root(q)) return out->set_cached.push_back({q.process_set, *id});
  }
  out->requests.push_back(q);  // a copy: the caller's requests keep their buffers
}

Status Coordinator::add_set_cached(const std::vector<CachedInSet>& cached, int source, Clock::time_point now) {
  for (const CachedInSet& c : cached) {
    auto it = set_caches_.find(c.process_set);
    const Request* known = it == set_caches_.end() ? nullptr : it->second.get(c.id);
    if (!known || known->kind == OpKind::kAlltoall)  // alltoall travels in full (find_for_root)
      return Status::internal("rank " + std::to_string(source) + " named entry " + std::to_string(c.id) +
                              " of process set " + std::to_string(c.process_set) +
                              "'s response cache, which rank 0 does not have");
    KOLO_RETURN_IF_ERROR(add_request(*known, source, now));
  }
  return Status::ok();
}

Status Coordinator::remember_emitted(const std::vector<Response>& ready) {
  // The new names only (take_ready remembered the others). Fusion may pull a set's later
  // allreduce forward into an earlier buffer: the members execute (and remember) in the
  // list's order, so rank 0 follows the list, not its tables.
  std::map<std::pair<int32_t, std::string_view>, const Request*> fresh;
  for (const Request& q : set_agreed_) fresh.emplace(std::make_pair(q.process_set, std::string_view(q.name)), &q);
  size_t found = 0;
  for (const Response& r : ready) {
    if (r.process_set == 0 || r.type == Response::Type::kError || !r.joined.empty()) continue;
    for (const std::string& n : r.names)
      if (auto it = fresh.find({r.process_set, n}); it != fresh.end()) {
        set_cache(r.process_set).remember(*it->second, &r.sizes);
        ++found;
      }
  }
  const size_t expected = set_agreed_.size();
  set_agreed_.clear();
  // A new name its members remember and rank 0 does not would shift every later id.
  if (found != expected)
    return Status::internal("rank 0 negotiated " + std::to_string(expected) +
                            " new names on process sets but emitted " + std::to_string(found) +
                            " of them (response cache)");
  return Status::ok();
}

const std::vector<int>* Coordinator::set_members(int32_t id) {
  if (sets_ == nullptr) return nullptr;
  if (sets_->version() != sets_version_) forget_removed_sets();
  if (auto it = known_sets_.find(id); it != known_sets_.end()) return &it->second;
  auto ranks = sets_->ranks(id);
  if (!ranks) return nullptr;
  return &known_sets_.emplace(id, std::move(*ranks)).first->second;
}

void Coordinator::forget_removed_sets() {
  sets_version_ = sets_->version();
  for (auto it = known_sets_.begin(); it != known_sets_.end();) {
    if (sets_->ranks(it->first)) {
      ++it;
      continue;
    }
    // A table with collectives still pending stays, so they fail by the stall inspector
    // rather than vanish (removing a set with pending work is refused, so this is rare).
    auto t = set_tables_.find(it->first);
    if (t != set_tables_.end() && t->second->num_pending() > 0) {
      ++it;
      continue;
    }
    if (t != set_tables_.end()) set_tables_.erase(t);
    set_caches_.erase(it->first);  // a set made later gets a new id, and starts empty
    backend_.release_set(it->first);
    it = known_sets_.erase(it);
  }
}

bool Coordinator::member_of(const Response& r) {
  if (r.process_set == 0) return true;
  const std::vector<int>* m = set_members(r.process_set);
  return m != nullptr && std::binary_search(m->begin(), m->end(), topo_.rank);
}

Status Coordinator::meet_set(const Response& r) {
  if (r.process_set == 0 || r.type == Response::Type::kError || !member_of(r) ||
      std::find(met_sets_.begin(), met_sets_.end(), r.process_set) != met_sets_.end())
    return Status::ok();
  met_sets_.push_back(r.process_set);
  const auto t0 = Clock::now();
  Status s = backend_.rendezvous_set(r.process_set, *set_members(r.process_set), [this] { return fast_answer_board(); });
  rendezvous_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(),
                           std::memory_order_relaxed);
  return s;
}

}  // namespace kolo

// The coordinator's state for process sets other than the global one (core/set_negotiation.h;
// docs/collectives.md, "Process sets"): each set's message table, its members as the
// registry knows them, the one response list shared by all sets, a name in flight on two sets
// at once, the first rendezvous of a set's members, and each set's response cache.
#include "core/set_negotiation.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "core/fusion.h"

namespace kolo {

SetNegotiation::SetNegotiation(ProcessSetRegistry* registry, Backend& backend, int rank, size_t cache_capacity,
                               MessageTable& global)
    : registry_(registry), backend_(backend), rank_(rank), cache_capacity_(cache_capacity), global_(global) {}

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
void SetNegotiation::fail_cross_set(const Request& q) {
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
  collect(0, &global_);
  for (auto& [id, t] : tables_) collect(id, t.get());
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
    const std::vector<int>* m = id == 0 ? nullptr : members(id);
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

MessageTable* SetNegotiation::table_for(int32_t id) {
  if (id == 0) return &global_;
  if (auto it = tables_.find(id); it != tables_.end()) return it->second.get();
  const std::vector<int>* m = members(id);
  if (m == nullptr || m->empty()) return nullptr;  // empty: refused by add_process_set
  return tables_.emplace(id, std::make_unique<MessageTable>(id, *m)).first->second.get();
}

void SetNegotiation::add_orphan(const Request& q, int rank) {
  // The submitting rank had the set registered; rank 0 no longer (or not yet) has: it
  // fails on the submitting rank alone (a peer's request for it gets its own error as it
  // arrives; one error for every rank would also end a peer's request still on its way,
  // whose arrival would then start a round of its own).
  Response e;
  e.type = Response::Type::kError;
  e.names = {q.name};
  e.process_set = q.process_set;
  e.ranks = {rank};
  e.error = std::string(op_kind_name(q.kind)) + " \"" + q.name + "\": process set " +
            std::to_string(q.process_set) + " is not registered on rank 0 (it was removed, or its "
            "kolo::add_process_set has not completed on every rank)";
  orphans_.push_back(std::move(e));
}

std::vector<Response> SetNegotiation::take_ready_all(size_t fusion_threshold, bool caching, Status* status) {
  // Negotiated tensors go straight into the fusion plan (no Response per fused tensor); the
  // planner fuses only within a set. One list for all sets: every rank sees every set's
  // responses in one order, and each set's members execute the same subsequence of it,
  // which is what keeps sets that overlap in time from deadlocking each other.
  FusionPlanner planner(fusion_threshold);
  global_.take_ready(&planner);
  agreed_.clear();
  for (auto& [id, table] : tables_) {
    const MessageTable::Agreed agreed{&cache(id), &agreed_};
    table->take_ready(&planner, caching ? &agreed : nullptr);
  }
  for (Response& e : orphans_) planner.add(std::move(e));
  orphans_.clear();
  std::vector<Response> ready = planner.take();
  for (Response& r : ready)
    if (r.type == Response::Type::kError && r.process_set != 0)
      if (const std::vector<int>* m = members(r.process_set))
        r.error += " [on " + describe_process_set(r.process_set, *m) + "]";
  if (!agreed_.empty()) *status = remember_emitted(ready);
  return ready;
}

void SetNegotiation::stalled(double threshold_s, std::chrono::steady_clock::time_point now,
                             std::vector<std::pair<int32_t, MessageTable::Pending>>* out) {
  for (auto& [id, table] : tables_)
    for (auto& p : table->stalled(threshold_s, now)) out->emplace_back(id, std::move(p));
}

ResponseCache& SetNegotiation::cache(int32_t id) {
  auto it = caches_.find(id);
  if (it == caches_.end()) it = caches_.emplace(id, ResponseCache(cache_capacity_, id)).first;
  return it->second;
}

void SetNegotiation::add_for_root(const Request& q, const ResponseCache& global, RequestList* out) {
  if (q.process_set == 0) {
    if (auto id = global.find_for_root(q)) return out->cached.push_back(*id);
  } else if (auto c = caches_.find(q.process_set); c != caches_.end()) {
    if (auto id = c->second.find_for_root(q)) return out->set_cached.push_back({q.process_set, *id});
  }
  out->requests.push_back(q);  // a copy: the caller's requests keep their buffers
}

const Request* SetNegotiation::cached(const CachedInSet& c) {
  auto it = caches_.find(c.process_set);
  const Request* known = it == caches_.end() ? nullptr : it->second.get(c.id);
  return known == nullptr || known->kind == OpKind::kAlltoall ? nullptr : known;
}

Status SetNegotiation::remember_emitted(const std::vector<Response>& ready) {
  // The new names only (take_ready remembered the others). Fusion may pull a set's later
  // allreduce forward into an earlier buffer: the members execute (and remember) in the
  // list's order, so rank 0 follows the list, not its tables.
  std::map<std::pair<int32_t, std::string_view>, const Request*> fresh;
  for (const Request& q : agreed_) fresh.emplace(std::make_pair(q.process_set, std::string_view(q.name)), &q);
  size_t found = 0;
  for (const Response& r : ready) {
    if (r.process_set == 0 || r.type == Response::Type::kError || !r.joined.empty()) continue;
    for (const std::string& n : r.names)
      if (auto it = fresh.find({r.process_set, n}); it != fresh.end()) {
        cache(r.process_set).remember(*it->second, &r.sizes);
        ++found;
      }
  }
  const size_t expected = agreed_.size();
  agreed_.clear();
  // A new name its members remember and rank 0 does not would shift every later id.
  if (found != expected)
    return Status::internal("rank 0 negotiated " + std::to_string(expected) +
                            " new names on process sets but emitted " + std::to_string(found) +
                            " of them (response cache)");
  return Status::ok();
}

const std::vector<int>* SetNegotiation::members(int32_t id) {
  if (registry_ == nullptr) return nullptr;
  if (registry_->version() != version_) forget_removed_sets();
  if (auto it = known_.find(id); it != known_.end()) return &it->second;
  auto ranks = registry_->ranks(id);
  if (!ranks) return nullptr;
  return &known_.emplace(id, std::move(*ranks)).first->second;
}

void SetNegotiation::forget_removed_sets() {
  version_ = registry_->version();
  for (auto it = known_.begin(); it != known_.end();) {
    if (registry_->ranks(it->first)) {
      ++it;
      continue;
    }
    // A table with collectives still pending stays, so they fail by the stall inspector
    // rather than vanish (removing a set with pending work is refused, so this is rare).
    auto t = tables_.find(it->first);
    if (t != tables_.end() && t->second->num_pending() > 0) {
      ++it;
      continue;
    }
    if (t != tables_.end()) tables_.erase(t);
    caches_.erase(it->first);  // a set made later gets a new id, and starts empty
    backend_.release_set(it->first);
    it = known_.erase(it);
  }
}

bool SetNegotiation::member_of(const Response& r) {
  if (r.process_set == 0) return true;
  const std::vector<int>* m = members(r.process_set);
  return m != nullptr && std::binary_search(m->begin(), m->end(), rank_);
}

bool SetNegotiation::must_meet(const Response& r) {
  if (r.process_set == 0 || r.type == Response::Type::kError || !member_of(r) ||
      std::find(met_.begin(), met_.end(), r.process_set) != met_.end())
    return false;
  met_.push_back(r.process_set);
  return true;
}

}  // namespace kolo

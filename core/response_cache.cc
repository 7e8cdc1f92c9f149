#include "core/response_cache.h"

namespace kolo {
namespace {

// Equal in everything negotiation compares (the device's ordinal may differ across ranks).
bool same_signature(const Request& a, const Request& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.reduce_op == b.reduce_op && a.shape == b.shape &&
         a.root == b.root && a.prescale == b.prescale && a.postscale == b.postscale &&
         a.device.kind == b.device.kind && a.group == b.group && a.group_size == b.group_size &&
         a.splits == b.splits;
}

}  // namespace

std::optional<uint32_t> ResponseCache::find(const Request& q) const {
  if (!cacheable(q)) return std::nullopt;
  auto it = ids_.find(q.name);
  if (it == ids_.end() || !same_signature(entries_[it->second], q)) return std::nullopt;
  return it->second;
}

const Request* ResponseCache::get(uint32_t id) const { return id < entries_.size() ? &entries_[id] : nullptr; }

void ResponseCache::remember(const Request& q, const std::vector<int64_t>* matrix) {
  if (!enabled() || !cacheable(q)) return;
  static const std::vector<int64_t> kNone;
  const std::vector<int64_t>& m = q.kind == OpKind::kAlltoall && matrix ? *matrix : kNone;
  auto it = ids_.find(q.name);
  if (it != ids_.end()) {
    // Every step remembers the same tensors again: copy only a changed signature, which
    // replaces the old one under the same id. An alltoall's matrix may change while this
    // rank's own request did not (a peer changed its splits): compared on its own.
    if (!same_signature(entries_[it->second], q)) entries_[it->second] = q;
    if (matrices_[it->second] != m) matrices_[it->second] = m;
    return;
  }
  if (entries_.size() >= capacity_) return;
  ids_.emplace(q.name, static_cast<uint32_t>(entries_.size()));
  entries_.push_back(q);
  matrices_.push_back(m);
}

}  // namespace kolo

// core/fusion.h — packing small allreduces into shared buffers: from the ordered list of
// ready responses to the list every rank executes.
//
// Allreduces with the same dtype, reduce op, scale factors, device, process set and joined
// ranks (kolo::join()) are merged into one
// response while the merged size stays within `threshold_bytes`. A tensor at or above the
// threshold is executed alone, in place (no copy in or out). Merging may pull a later tensor
// forward into an earlier buffer, never backward; every rank receives the result from rank 0,
// so all execute the same buffers in the same order. Non-allreduce responses keep their
// position.
//
// FusionPlanner does this one response at a time, so that rank 0 can feed it the tensors it
// negotiated without building a Response per tensor; fuse_responses is the same plan as a
// pure function of a list.
// Thread safety: FusionPlanner is a plain value (one thread); fuse_responses is pure.
#pragma once

#include <cstddef>
#include <vector>

#include "core/message.h"

namespace kolo {

class FusionPlanner {
 public:
  explicit FusionPlanner(size_t threshold_bytes) : threshold_(threshold_bytes) {}
  // Appends `r` (one tensor, or any non-allreduce response) to the plan. Copies only what it
  // keeps: a tensor merged into an open buffer costs its name and size, not a Response.
  void add(const Response& r);
  void add(Response&& r);
  // The plan so far; the planner is then empty (its threshold stays).
  std::vector<Response> take();
  bool empty() const { return out_.empty(); }

 private:
  // Merges `r` into an open buffer of its kind, or opens one; false when `r` runs alone.
  bool merge(const Response& r, size_t bytes);
  // Index of the open buffer `r` fits in, or -1; forgets a full one of r's kind.
  ptrdiff_t open_buffer_for(const Response& r, size_t bytes);

  size_t threshold_;
  std::vector<Response> out_;
  // Index into out_ of the open (not yet full) buffer for each fusable kind; few kinds occur
  // at once, so a linear scan is cheapest.
  std::vector<size_t> open_;
  std::vector<size_t> open_bytes_;
};

std::vector<Response> fuse_responses(std::vector<Response> ready, size_t threshold_bytes);

// The common case of the plan, without a Response per tensor (the fast path's rounds):
// `request_at(i)` (i < count) gives the i-th tensor's Request. When every one is an
// allreduce fusable with the first (dtype, op, scales, device; the caller vouches for the
// process set, 0, and joined ranks, none) and none runs alone (0 < bytes < threshold), fills
// (*out)[0, n) with the plan FusionPlanner makes for them, buffers filled in order, and returns
// n; otherwise returns 0 (plan with FusionPlanner). Elements of *out past n are stale; those
// before keep their buffers' capacity from call to call.
template <typename RequestAt>
size_t plan_uniform_allreduces(size_t count, RequestAt request_at, size_t threshold_bytes,
                               std::vector<Response>* out) {
  if (count == 0) return 0;
  const Request& a = request_at(size_t{0});
  if (a.kind != OpKind::kAllreduce) return 0;
  const size_t esize = dtype_size(a.dtype);
  size_t n = 0, open = 0, k = 0;  // k: names in the open buffer (its names past k are stale)
  for (size_t i = 0; i < count; ++i) {
    const Request& q = request_at(i);
    const int64_t elems = num_elements(q.shape);
    const size_t bytes = static_cast<size_t>(elems) * esize;
    if (q.kind != OpKind::kAllreduce || q.dtype != a.dtype || q.reduce_op != a.reduce_op || q.device != a.device ||
        q.prescale != a.prescale || q.postscale != a.postscale || bytes == 0 || bytes >= threshold_bytes)
      return 0;
    if (n == 0 || open + bytes > threshold_bytes) {
      if (n > 0) (*out)[n - 1].names.resize(k);
      if (n == out->size()) out->emplace_back();
      Response& r = (*out)[n++];
      r.type = Response::Type::kAllreduce;
      copy_op_fields(a, &r);
      r.sizes.clear();
      r.error.clear();
      r.joined.clear();
      r.row_shape.clear();
      r.process_set = 0;
      open = 0, k = 0;
    }
    Response& r = (*out)[n - 1];
    if (k < r.names.size()) r.names[k] = q.name;  // in place: the string keeps its capacity
    else r.names.push_back(q.name);
    ++k;
    r.sizes.push_back(elems);
    open += bytes;
  }
  (*out)[n - 1].names.resize(k);
  return n;
}

// Bytes of one allreduce response (all its tensors).
size_t response_bytes(const Response& r);

}  // namespace kolo

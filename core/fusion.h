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

// Bytes of one allreduce response (all its tensors).
size_t response_bytes(const Response& r);

}  // namespace kolo

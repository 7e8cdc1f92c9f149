// core/fusion.h — packing small allreduces into shared buffers: a pure function from the
// ordered list of ready responses to the list every rank executes.
//
// Allreduces with the same dtype, reduce op, scale factors and device are merged into one
// response while the merged size stays within `threshold_bytes`. A tensor at or above the
// threshold is executed alone, in place (no copy in or out). Merging may pull a later tensor
// forward into an earlier buffer, never backward; every rank receives the result from rank 0,
// so all execute the same buffers in the same order. Non-allreduce responses keep their
// position.
//
// Thread safety: pure function.
#pragma once

#include <cstddef>
#include <vector>

#include "core/message.h"

namespace kolo {

std::vector<Response> fuse_responses(std::vector<Response> ready, size_t threshold_bytes);

// Bytes of one allreduce response (all its tensors).
size_t response_bytes(const Response& r);

}  // namespace kolo

// Fusion planning (see core/fusion.h).
#include "core/fusion.h"

namespace kolo {
namespace {

bool fusable(const Response& a, const Response& b) {
  return a.type == Response::Type::kAllreduce && b.type == Response::Type::kAllreduce &&
         a.dtype == b.dtype && a.reduce_op == b.reduce_op && a.device == b.device &&
         a.prescale == b.prescale && a.postscale == b.postscale;
}

}  // namespace

size_t response_bytes(const Response& r) {
  size_t n = 0;
  for (int64_t s : r.sizes) n += static_cast<size_t>(s);
  return n * dtype_size(r.dtype);
}

std::vector<Response> fuse_responses(std::vector<Response> ready, size_t threshold) {
  std::vector<Response> out;
  out.reserve(ready.size());
  // Index into `out` of the open (not yet full) buffer for each fusable kind; few kinds
  // occur at once, so a linear scan over open buffers is cheapest.
  std::vector<size_t> open;
  std::vector<size_t> open_bytes;
  for (Response& r : ready) {
    const size_t bytes = response_bytes(r);
    if (r.type != Response::Type::kAllreduce || bytes >= threshold || bytes == 0) {
      out.push_back(std::move(r));
      continue;
    }
    bool placed = false;
    for (size_t i = 0; i < open.size() && !placed; ++i) {
      Response& bucket = out[open[i]];
      if (!fusable(bucket, r) || open_bytes[i] + bytes > threshold) continue;
      bucket.names.push_back(std::move(r.names[0]));
      bucket.sizes.push_back(r.sizes[0]);
      open_bytes[i] += bytes;
      placed = true;
    }
    if (placed) continue;
    // Start a new buffer; it replaces a full one of the same kind, if any.
    for (size_t i = 0; i < open.size(); ++i) {
      if (fusable(out[open[i]], r)) {
        open.erase(open.begin() + static_cast<ptrdiff_t>(i));
        open_bytes.erase(open_bytes.begin() + static_cast<ptrdiff_t>(i));
        break;
      }
    }
    open.push_back(out.size());
    open_bytes.push_back(bytes);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace kolo

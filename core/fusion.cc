// Fusion planning (see core/fusion.h).
#include "core/fusion.h"

namespace kolo {
namespace {

bool fusable(const Response& a, const Response& b) {
  return a.type == Response::Type::kAllreduce && b.type == Response::Type::kAllreduce &&
         a.dtype == b.dtype && a.reduce_op == b.reduce_op && a.device == b.device &&
         a.prescale == b.prescale && a.postscale == b.postscale && a.joined == b.joined &&
         a.process_set == b.process_set;
}

bool runs_alone(const Response& r, size_t bytes, size_t threshold) {
  return r.type != Response::Type::kAllreduce || bytes >= threshold || bytes == 0 || r.names.size() != 1 ||
         r.sizes.size() != 1;
}

}  // namespace

size_t response_bytes(const Response& r) {
  size_t n = 0;
  for (int64_t s : r.sizes) n += static_cast<size_t>(s);
  return n * dtype_size(r.dtype);
}

ptrdiff_t FusionPlanner::open_buffer_for(const Response& r, size_t bytes) {
  for (size_t i = 0; i < open_.size(); ++i) {
    if (!fusable(out_[open_[i]], r)) continue;
    if (open_bytes_[i] + bytes <= threshold_) return static_cast<ptrdiff_t>(i);
    // Full: a new buffer of this kind replaces it.
    open_.erase(open_.begin() + static_cast<ptrdiff_t>(i));
    open_bytes_.erase(open_bytes_.begin() + static_cast<ptrdiff_t>(i));
    return -1;
  }
  return -1;
}

bool FusionPlanner::merge(const Response& r, size_t bytes) {
  const ptrdiff_t i = open_buffer_for(r, bytes);
  if (i < 0) return false;
  Response& bucket = out_[open_[static_cast<size_t>(i)]];
  bucket.names.push_back(r.names[0]);
  bucket.sizes.push_back(r.sizes[0]);
  open_bytes_[static_cast<size_t>(i)] += bytes;
  return true;
}

void FusionPlanner::add(const Response& r) {
  const size_t bytes = response_bytes(r);
  if (runs_alone(r, bytes, threshold_)) {
    out_.push_back(r);
    return;
  }
  if (merge(r, bytes)) return;
  open_.push_back(out_.size());
  open_bytes_.push_back(bytes);
  out_.push_back(r);
}

void FusionPlanner::add(Response&& r) {
  const size_t bytes = response_bytes(r);
  if (!runs_alone(r, bytes, threshold_)) {
    if (merge(r, bytes)) return;
    open_.push_back(out_.size());
    open_bytes_.push_back(bytes);
  }
  out_.push_back(std::move(r));
}

std::vector<Response> FusionPlanner::take() {
  open_.clear();
  open_bytes_.clear();
  std::vector<Response> out;
  out.swap(out_);
  return out;
}

std::vector<Response> fuse_responses(std::vector<Response> ready, size_t threshold) {
  FusionPlanner planner(threshold);
  for (Response& r : ready) planner.add(std::move(r));
  return planner.take();
}

}  // namespace kolo

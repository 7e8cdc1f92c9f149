// Stand-in tensors of a rank that has joined (see core/join.h).
#include "core/join.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu_reduce.h"

namespace kolo {
namespace {
constexpr size_t kAlign = 64;
size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

bool joined_in(const Response& r, int rank) {
  return !r.joined.empty() && std::binary_search(r.joined.begin(), r.joined.end(), rank);
}

void stand_in_entries(const Response& r, std::vector<TensorEntry>* out, std::vector<std::byte>* scratch) {
  out->clear();
  if (r.type == Response::Type::kError) return;
  const size_t esize = dtype_size(r.dtype);
  // Element count of each stand-in: allreduce one per tensor, broadcast the root's count,
  // allgather none (its rows are zero).
  std::vector<size_t> counts;
  if (r.type == Response::Type::kAllreduce)
    for (int64_t s : r.sizes) counts.push_back(static_cast<size_t>(s));
  else if (r.type == Response::Type::kBroadcast)
    counts.push_back(r.sizes.empty() ? 0 : static_cast<size_t>(r.sizes[0]));
  else
    counts.push_back(0);
  size_t total = 0;
  for (size_t c : counts) total += round_up(std::max<size_t>(c * esize, 1));
  if (scratch->size() < total) scratch->resize(total);
  size_t at = 0;
  for (size_t i = 0; i < counts.size() && i < r.names.size(); ++i) {
    TensorEntry e;
    e.view.data = scratch->data() + at;
    e.view.dtype = r.dtype;
    e.view.device = r.device;
    if (r.type == Response::Type::kAllgather) {
      e.view.shape.push_back(0);
      e.view.shape.insert(e.view.shape.end(), r.row_shape.begin(), r.row_shape.end());
    } else {
      e.view.shape = {static_cast<int64_t>(counts[i])};
    }
    if (r.type == Response::Type::kAllreduce) kernels::fill_identity(e.view.data, counts[i], r.dtype, r.reduce_op);
    const OpKind kind = r.type == Response::Type::kAllreduce   ? OpKind::kAllreduce
                        : r.type == Response::Type::kBroadcast ? OpKind::kBroadcast
                                                               : OpKind::kAllgather;
    e.request.name = r.names[i];
    e.request.kind = kind;
    e.request.dtype = r.dtype;
    e.request.shape = e.view.shape;
    e.handle = detail::make_handle_state(r.names[i], kind);
    out->push_back(std::move(e));
    at += round_up(std::max<size_t>(counts[i] * esize, 1));
  }
}

}  // namespace kolo

// A shared segment of per-rank regions: ops/shm/shm_regions.h.
#include "ops/shm/shm_regions.h"

#include <utility>

namespace kolo::shm {
namespace {

struct RegionsHeader {
  uint64_t magic;
  uint64_t local_size;
  uint64_t bytes_per_rank;
};
static_assert(sizeof(RegionsHeader) <= kRegionsHeader, "the header fits its page");

}  // namespace

Status establish_regions(const RegionsOptions& o, const Agree& agree, Regions* out) {
  if (o.local_size < 1 || o.local_rank < 0 || o.local_rank >= o.local_size || o.bytes_per_rank == 0) {
    return Status::invalid_argument(o.what + ": local rank " + std::to_string(o.local_rank) + " of " +
                                    std::to_string(o.local_size) + " with " + std::to_string(o.bytes_per_rank) +
                                    " bytes per rank is invalid");
  }
  Regions r;
  r.bytes_per_rank = (o.bytes_per_rank + kRegionsHeader - 1) / kRegionsHeader * kRegionsHeader;
  const size_t total = kRegionsHeader + r.bytes_per_rank * static_cast<size_t>(o.local_size);
  const auto init = [&](void* base) {
    auto* h = static_cast<RegionsHeader*>(base);
    h->local_size = static_cast<uint64_t>(o.local_size);
    h->bytes_per_rank = r.bytes_per_rank;
    h->magic = o.magic;
  };
  const auto on_mapped = [&](void* base) -> Status {
    const auto* h = static_cast<const RegionsHeader*>(base);
    if (h->magic != o.magic || h->local_size != static_cast<uint64_t>(o.local_size) ||
        h->bytes_per_rank != r.bytes_per_rank) {
      return Status::communication(o.what + " \"" + o.name + "\": ranks disagree on its size");
    }
    r.base = static_cast<char*>(base) + kRegionsHeader;
    return Status::ok();
  };
  KOLO_RETURN_IF_ERROR(SharedMapping::establish(o.name, total, o.local_rank == 0, agree, init, on_mapped,
                                                &r.mapping, Commit::kLazy));
  *out = std::move(r);
  return Status::ok();
}

}  // namespace kolo::shm

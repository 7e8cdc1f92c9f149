// ops/shm/shm_regions.h — a shared segment of one region per local rank behind a header
// page: the layout ShmArena and ShmResultPool share.
//
// Layout: page 0 holds a header (magic, local_size, bytes_per_rank) that the creator writes
// and every rank checks when it maps the segment, so ranks that disagree on the size fail
// at creation with an error instead of reading each other's memory wrongly later. Region r
// starts at kRegionsHeader + r * bytes_per_rank (page-aligned). The segment is lazy
// (Commit::kLazy): a region costs nothing until its owner commits pages of it.
//
// Ownership: the caller gets the mapping (and with it the memory) in *out.
// Thread safety: collective over the local ranks; call from one thread per rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kolo/status.h"
#include "ops/shm/shm_segment.h"

namespace kolo::shm {

inline constexpr size_t kRegionsHeader = 4096;

struct RegionsOptions {
  std::string what;     // for messages: "shared memory arena", ...
  std::string name;     // segment name, unique per job and host
  uint64_t magic = 0;   // a constant per kind of segment
  int local_rank = 0;
  int local_size = 1;
  size_t bytes_per_rank = 0;  // > 0; rounded up to 4 KiB
};

struct Regions {
  SharedMapping mapping;
  char* base = nullptr;        // region 0, as mapped here
  size_t bytes_per_rank = 0;   // rounded
  char* region(int rank) const { return base + static_cast<size_t>(rank) * bytes_per_rank; }
  // Where region `rank` starts in the segment (for SharedMapping::commit/decommit).
  size_t offset(int rank) const { return kRegionsHeader + static_cast<size_t>(rank) * bytes_per_rank; }
};

// Checks the options, then creates (local rank 0) or maps the segment and checks its header
// on every rank (SharedMapping::establish). Fails on every rank if it fails on one; *out is
// unchanged then.
Status establish_regions(const RegionsOptions& options, const Agree& agree, Regions* out);

}  // namespace kolo::shm

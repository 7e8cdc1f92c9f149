// ShmGroup::allreduce_in_arena (ops/shm/shm_group.h): zero-copy allreduce of buffers that
// live in a ShmArena.
//
//   step 1: every rank's pieces are ready (prescaled in place);
//   rank r reduces slice r of the logical buffer — rank 0's values first — reading every
//   rank's region in place, a cache-sized block at a time, and writes it over its own slice;
//   step 2: every slice is reduced; rank r copies slice j from rank j's region, for j != r;
//   step 3: every rank has finished reading: the caller may write its buffer again.
// Per rank this reads the buffer 1.5 times and writes it once (np=2); the slot path also
// copies it into the slots first.
#include <cstring>

#include "ops/cpu_reduce.h"
#include "ops/shm/shm_arena.h"
#include "ops/shm/shm_group.h"
#include "ops/shm/shm_kernels.h"
#include "ops/shm/shm_pieces.h"

namespace kolo::shm {
namespace {

constexpr size_t kBlockBytes = 64 * 1024;  // reduced in L2, then written over the slice

// Where the pieces sit in the region (FNV-1a over offset, count): ranks must agree.
uint64_t layout_hash(const ShmArena& arena, std::span<const Piece> pieces) {
  uint64_t h = 1469598103934665603ULL;
  const char* base = arena.region(arena.local_rank());
  for (const Piece& p : pieces) {
    const uint64_t words[2] = {static_cast<uint64_t>(static_cast<const char*>(p.data) - base), p.count};
    for (uint64_t w : words) {
      for (int b = 0; b < 8; ++b) h = (h ^ ((w >> (8 * b)) & 0xffu)) * 1099511628211ULL;
    }
  }
  return h;
}

}  // namespace

Status ShmGroup::allreduce_in_arena(const ShmArena& arena, std::span<const Piece> pieces,
                                    DType dtype, ReduceOp op, double prescale, double postscale) {
  KOLO_RETURN_IF_ERROR(usable());
  KOLO_RETURN_IF_ERROR(detail::check_pieces(pieces, prescale, postscale));
  const int n = opts_.local_size;
  const int r = opts_.local_rank;
  const size_t esize = dtype_size(dtype);
  if (arena.local_size() != n || arena.local_rank() != r) {
    return Status::invalid_argument("shared memory: the arena belongs to another group");
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].count > 0 && !arena.contains(pieces[i].data, pieces[i].count * esize)) {
      return Status::invalid_argument("shared memory: allreduce_in_arena piece " + std::to_string(i) +
                                      " is not inside this rank's arena region");
    }
  }
  for (const Piece& p : pieces) ops::scale_copy(p.data, p.data, p.count, dtype, prescale);
  if (n == 1) {
    for (const Piece& p : pieces) ops::apply_postscale(p.data, p.count, dtype, op, 1, postscale);
    return Status::ok();
  }
  const detail::Pieces all(pieces, esize);
  const detail::Slicing slices(all.total(), n, esize);
  const char* mine = arena.region(r);
  const auto peer_copy = [&](int j, const char* p) { return arena.region(j) + (p - mine); };
  const CallDesc d = detail::describe_arena_reduce(dtype, op, layout_hash(arena, pieces));

  const uint64_t e1 = sync_.next_step();
  KOLO_RETURN_IF_ERROR(record(sync_.arrive(e1, d)));
  KOLO_RETURN_IF_ERROR(record(sync_.wait_all(e1, true)));
  block_.resize(kBlockBytes);
  const size_t block = kBlockBytes / esize;
  all.for_range(slices.lo(r), slices.len(r), [&](char* user, size_t, size_t cnt) {
    for (size_t b = 0; b < cnt; b += block) {
      const size_t m = std::min(block, cnt - b);
      char* at = user + b * esize;
      for (int j = 0; j < n; ++j) srcs_[j] = peer_copy(j, at);
      reduce_sources(block_.data(), srcs_.data(), n, m, dtype, op);
      ops::apply_postscale(block_.data(), m, dtype, op, n, postscale);
      std::memcpy(at, block_.data(), m * esize);
    }
  });

  const uint64_t e2 = sync_.next_step();
  KOLO_RETURN_IF_ERROR(record(sync_.arrive(e2)));
  KOLO_RETURN_IF_ERROR(record(sync_.wait_all(e2)));
  for (int j = 0; j < n; ++j) {
    if (j == r) continue;
    all.for_range(slices.lo(j), slices.len(j), [&](char* user, size_t, size_t cnt) {
      std::memcpy(user, peer_copy(j, user), cnt * esize);
    });
  }

  const uint64_t e3 = sync_.next_step();
  KOLO_RETURN_IF_ERROR(record(sync_.arrive(e3)));
  return record(sync_.wait_all(e3));
}

}  // namespace kolo::shm

// ShmGroup::allreduce_in_arena (ops/shm/shm_group.h): zero-copy allreduce of buffers that
// live in a ShmArena, pipelined in chunks of Options::arena_chunk_bytes.
//
//   step 0: every rank's pieces are ready; ranks compare their calls (and where their
//   buffers lie: a difference fails this call only, see ShmGroup::allreduce);
//   step k (one per chunk): rank r reduces slice r of chunk k — rank 0's values first —
//   reading every rank's region in place, pre- and post-scales it in the same pass (so the
//   buffers are untouched until every rank agreed, and fp16/bf16 round once) and writes it
//   over its own slice; then it arrives at step k and copies the slices of chunk k-1 from
//   their owners (one step behind, so a rank rarely waits, and the owner's result is still
//   in the L3 cache);
//   last step: every rank has finished reading: the caller may write its buffer again.
// Per rank the buffer is read once and written once from memory, like one memcpy; nothing
// passes through the engine's slots. Why writing over a slice is safe: rank j reads slice j
// of rank r's chunk k before it arrives at step k, and rank r overwrites that slice only
// after seeing that arrival; rank r writes its own slice only before it arrives at step k.
#include <algorithm>
#include <cstring>

#include "kernels/cpu_reduce.h"
#include "ops/shm/shm_arena.h"
#include "ops/shm/shm_group.h"
#include "ops/shm/shm_kernels.h"
#include "ops/shm/shm_pieces.h"

namespace kolo::shm {
namespace {

constexpr size_t kBlockBytes = 64 * 1024;  // reduced in L2, then written over the slice

uint64_t fnv_words(uint64_t h, const uint64_t (&words)[2]) {
  for (uint64_t w : words) {
    for (int b = 0; b < 8; ++b) h = (h ^ ((w >> (8 * b)) & 0xffu)) * 1099511628211ULL;
  }
  return h;
}

}  // namespace

uint64_t piece_placement(const ShmArena& arena, const Piece& p, size_t esize) {
  if (p.count == 0 || !arena.contains(p.data, p.count * esize)) return 0;
  return static_cast<uint64_t>(static_cast<const char*>(p.data) - arena.region(arena.local_rank())) + 1;
}

uint64_t placement_of(const ShmArena& arena, std::span<const Piece> pieces, size_t esize) {
  uint64_t h = 1469598103934665603ULL;
  for (const Piece& p : pieces) h = fnv_words(h, {piece_placement(arena, p, esize), p.count});
  return h | 1;  // never 0 ("not checked")
}

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
  if (n == 1) {
    for (const Piece& p : pieces) {
      const void* src = p.data;
      reduce_sources(p.data, &src, 1, p.count, dtype, op, nullptr, PostScale{true, 1, postscale}, prescale);
    }
    return Status::ok();
  }
  const detail::Pieces all(pieces, esize);
  const size_t total = all.total();
  const size_t chunk = std::max<size_t>(opts_.arena_chunk_bytes / esize, static_cast<size_t>(n) * 64);
  const char* mine = arena.region(r);
  const auto peer_copy = [&](int j, const char* p) { return arena.region(j) + (p - mine); };
  // The same descriptor as the slot path's, so that a rank on the slot path (its tensors
  // not in the arena) differs only in the placement: this call fails, the group stays.
  const CallDesc d = detail::describe_reduce(false, dtype, op, total, placement_of(arena, pieces, esize));
  const PostScale post{true, n, postscale};
  const bool direct = reduce_in_place_any(dtype, op);
  if (!direct) block_.resize(kBlockBytes);

  // Reduces slice r of the chunk at `off` (m elements) over this rank's own copy.
  const auto reduce_mine = [&](size_t off, size_t m) {
    const detail::Slicing slices(m, n, esize);
    all.for_range(off + slices.lo(r), slices.len(r), [&](char* user, size_t, size_t cnt) {
      if (direct) {
        for (int j = 0; j < n; ++j) srcs_[j] = peer_copy(j, user);
        reduce_sources(user, srcs_.data(), n, cnt, dtype, op, nullptr, post, prescale);
        return;
      }
      const size_t block = kBlockBytes / esize;
      for (size_t b = 0; b < cnt; b += block) {
        const size_t k = std::min(block, cnt - b);
        char* at = user + b * esize;
        for (int j = 0; j < n; ++j) srcs_[j] = peer_copy(j, at);
        reduce_sources(block_.data(), srcs_.data(), n, k, dtype, op, nullptr, post, prescale);
        std::memcpy(at, block_.data(), k * esize);
      }
    });
  };
  // Copies the other ranks' reduced slices of the chunk at `off`, reduced at step e.
  const auto gather = [&](uint64_t e, size_t off, size_t m) -> Status {
    const detail::Slicing slices(m, n, esize);
    for (int j = 0; j < n; ++j) {
      if (j == r) continue;
      KOLO_RETURN_IF_ERROR(record(sync_.wait_for(j, e)));
      all.for_range(off + slices.lo(j), slices.len(j), [&](char* user, size_t, size_t cnt) {
        copy_bytes(user, peer_copy(j, user), cnt * esize);
      });
    }
    return Status::ok();
  };

  const uint64_t e0 = sync_.next_step();
  KOLO_RETURN_IF_ERROR(record(sync_.arrive(e0, d)));
  KOLO_RETURN_IF_ERROR(agree_first(e0));
  uint64_t prev = 0;
  size_t prev_off = 0, prev_m = 0;
  for (size_t off = 0; off < total; off += chunk) {
    const size_t m = std::min(chunk, total - off);
    reduce_mine(off, m);
    const uint64_t e = sync_.next_step();
    KOLO_RETURN_IF_ERROR(record(sync_.arrive(e)));
    if (prev != 0) KOLO_RETURN_IF_ERROR(gather(prev, prev_off, prev_m));
    prev = e;
    prev_off = off;
    prev_m = m;
  }
  if (prev != 0) KOLO_RETURN_IF_ERROR(gather(prev, prev_off, prev_m));

  const uint64_t last = sync_.next_step();
  KOLO_RETURN_IF_ERROR(record(sync_.arrive(last)));
  return record(sync_.wait_all(last));
}

}  // namespace kolo::shm

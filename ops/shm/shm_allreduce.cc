// ShmGroup::allreduce and ShmGroup::reduce_to_leader (ops/shm/shm_group.h).
//
// Large buffers: chunked reduce-scatter + all-gather through the slots, two steps per chunk:
//   step A (half A): rank r copies the chunk, except its own slice, into its slot;
//   after all arrive, rank r sums slice r — rank 0's values first — reading its own slice
//   straight from its buffer, and writes the result to slice r of its slot in half B;
//   step B (half B): after all arrive, rank r copies every other slice's result to its buffer.
// The user's buffer is read once and written once; everything else stays in cache.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu_reduce.h"
#include "ops/shm/shm_group.h"
#include "ops/shm/shm_kernels.h"
#include "ops/shm/shm_pieces.h"

namespace kolo::shm {

Status detail::check_pieces(std::span<const Piece> pieces, double prescale, double postscale) {
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].data == nullptr && pieces[i].count > 0) {
      return Status::invalid_argument("shared memory: allreduce piece " + std::to_string(i) +
                                      " has " + std::to_string(pieces[i].count) +
                                      " elements but no data");
    }
  }
  if (!std::isfinite(prescale) || !std::isfinite(postscale)) {
    return Status::invalid_argument("shared memory: allreduce scale factors must be finite");
  }
  return Status::ok();
}

Status ShmGroup::allreduce(void* buf, size_t count, DType dtype, ReduceOp op, double prescale,
                           double postscale) {
  const Piece p{buf, count};
  return reduce({&p, 1}, dtype, op, prescale, postscale, Target::kAll);
}

Status ShmGroup::allreduce(std::span<const Piece> pieces, DType dtype, ReduceOp op,
                           double prescale, double postscale, uint64_t placement) {
  return reduce(pieces, dtype, op, prescale, postscale, Target::kAll, placement);
}

Status ShmGroup::reduce_to_leader(void* buf, size_t count, DType dtype, ReduceOp op,
                                  double prescale) {
  const Piece p{buf, count};
  return reduce({&p, 1}, dtype, op, prescale, 1.0, Target::kLeader);
}

Status ShmGroup::reduce_to_leader(std::span<const Piece> pieces, DType dtype, ReduceOp op,
                                  double prescale) {
  return reduce(pieces, dtype, op, prescale, 1.0, Target::kLeader);
}

Status ShmGroup::reduce(std::span<const Piece> pieces, DType dtype, ReduceOp op,
                        double prescale, double postscale, Target target, uint64_t placement) {
  KOLO_RETURN_IF_ERROR(usable());
  KOLO_RETURN_IF_ERROR(detail::check_pieces(pieces, prescale, postscale));
  const size_t esize = dtype_size(dtype);
  size_t total = 0;
  for (const Piece& p : pieces) total += p.count;
  if (opts_.local_size == 1) {
    // Alone on the host: the scales are the whole collective (one rounding for fp16/bf16).
    const PostScale post{target == Target::kAll, 1, postscale};
    for (const Piece& p : pieces) {
      const void* src = p.data;
      reduce_sources(p.data, &src, 1, p.count, dtype, op, nullptr, post, prescale);
    }
    return Status::ok();
  }
  const CallDesc d = detail::describe_reduce(target == Target::kLeader, dtype, op, total, placement);
  if (total * esize <= opts_.small_bytes) {
    return reduce_small(pieces, total, dtype, op, prescale, postscale, target, d);
  }
  return reduce_chunked(pieces, total, dtype, op, prescale, postscale, target, d);
}

// One step: everyone publishes everything, and whoever needs the result reduces it all.
Status ShmGroup::reduce_small(std::span<const Piece> pieces, size_t total, DType dtype,
                              ReduceOp op, double prescale, double postscale, Target target,
                              const CallDesc& d) {
  const int n = opts_.local_size;
  const size_t esize = dtype_size(dtype);
  const detail::Pieces all(pieces, esize);
  const uint64_t e = sync_.next_step();
  KOLO_RETURN_IF_ERROR(record(sync_.prepare(e)));
  char* mine = slot(e, opts_.local_rank);
  all.for_range(0, total, [&](char* user, size_t done, size_t m) {
    copy_bytes(mine + done * esize, user, m * esize);  // raw: the kernel applies the prescale
  });
  KOLO_RETURN_IF_ERROR(record(sync_.arrive(e, d)));
  if (target == Target::kLeader && opts_.local_rank != 0) return Status::ok();
  KOLO_RETURN_IF_ERROR(agree_first(e));
  const PostScale post{target == Target::kAll, n, postscale};
  all.for_range(0, total, [&](char* user, size_t done, size_t m) {
    for (int j = 0; j < n; ++j) srcs_[j] = slot(e, j) + done * esize;
    reduce_sources(user, srcs_.data(), n, m, dtype, op, nullptr, post, prescale);
  });
  return Status::ok();
}

Status ShmGroup::reduce_chunked(std::span<const Piece> pieces, size_t total, DType dtype,
                                ReduceOp op, double prescale, double postscale, Target target,
                                const CallDesc& d) {
  const int n = opts_.local_size;
  const int r = opts_.local_rank;
  const size_t esize = dtype_size(dtype);
  const detail::Pieces all(pieces, esize);
  const size_t chunk = slot_bytes_ / esize;
  const bool gets_result = target == Target::kAll || r == 0;
  for (size_t off = 0; off < total; off += chunk) {
    const size_t m = std::min(chunk, total - off);
    const detail::Slicing slices(m, n, esize);
    const auto lo = [&](int j) { return slices.lo(j); };
    const size_t my_lo = lo(r);
    const size_t my_n = slices.len(r);

    // Step A: publish the slices the other ranks reduce, unscaled (the reduction applies
    // the prescale, so that fp16/bf16 are rounded once).
    const uint64_t ea = sync_.next_step();
    KOLO_RETURN_IF_ERROR(record(sync_.prepare(ea)));
    char* mine_a = slot(ea, r);
    for (int j = 0; j < n; ++j) {
      if (j == r) continue;
      all.for_range(off + lo(j), slices.len(j), [&](char* user, size_t done, size_t cnt) {
        copy_bytes(mine_a + (lo(j) + done) * esize, user, cnt * esize);
      });
    }
    KOLO_RETURN_IF_ERROR(record(sync_.arrive(ea, d)));
    KOLO_RETURN_IF_ERROR(off == 0 ? agree_first(ea) : record(sync_.wait_all(ea)));

    // Reduce slice r into half B.
    const uint64_t eb = sync_.next_step();
    char* result = slot(eb, r) + my_lo * esize;
    // The result, post-scaled in the same pass, goes to the slot and the user's buffer.
    const PostScale post{target == Target::kAll, n, postscale};
    all.for_range(off + my_lo, my_n, [&](char* user, size_t done, size_t cnt) {
      for (int j = 0; j < n; ++j) srcs_[j] = slot(ea, j) + (my_lo + done) * esize;
      srcs_[r] = user;
      char* dst = result + done * esize;
      reduce_sources(dst, srcs_.data(), n, cnt, dtype, op, gets_result ? user : nullptr, post, prescale);
    });
    KOLO_RETURN_IF_ERROR(record(sync_.arrive(eb)));
    if (!gets_result) continue;

    // Step B: collect the other slices, each as soon as its owner has it (with more ranks
    // than cores the owners finish at different times).
    for (int j = 0; j < n; ++j) {
      if (j == r) continue;
      KOLO_RETURN_IF_ERROR(record(sync_.wait_for(j, eb)));
      const char* theirs = slot(eb, j) + lo(j) * esize;
      all.for_range(off + lo(j), slices.len(j), [&](char* user, size_t done, size_t cnt) {
        copy_bytes(user, theirs + done * esize, cnt * esize);
      });
    }
  }
  return Status::ok();
}

}  // namespace kolo::shm

// ShmGroup::reduce_slice and ShmGroup::gather_slices (ops/shm/shm_group.h): the host-local
// halves of the sliced hierarchical allreduce (shm_hierarchical.h). One step each, in the
// two halves' usual discipline (shm_sync.h):
//   reduce_slice: rank r copies the chunk, except its own slice, into its slot; after all
//     arrive, it combines slice r from every rank (rank 0's values first; its own straight
//     from its buffer) into private memory — the input of its cross-host ring (float32 for
//     fp16/bf16 values, which are rounded once, after the ring).
//   gather_slices: rank r puts its finished slice into its slot (at the slice's place) and
//     into its buffer; it copies every other rank's finished slice out of that rank's slot.
#include <algorithm>

#include "kernels/cpu_reduce.h"
#include "ops/shm/shm_group.h"
#include "ops/shm/shm_kernels.h"
#include "ops/shm/shm_pieces.h"

namespace kolo::shm {

Status ShmGroup::reduce_slice(std::span<const Piece> pieces, size_t total, size_t off, size_t m, DType dtype,
                              ReduceOp op, double prescale, void* out, bool first) {
  KOLO_RETURN_IF_ERROR(usable());
  if (first) KOLO_RETURN_IF_ERROR(detail::check_pieces(pieces, prescale, 1.0));
  const int n = opts_.local_size;
  const int r = opts_.local_rank;
  const size_t esize = dtype_size(dtype);
  const detail::Pieces all(pieces, esize);
  const detail::Slicing slices(m, n, esize);
  auto* dst = static_cast<char*>(out);
  if (m > slot_bytes_ / esize) return record(Status::internal("shared memory: a slice chunk exceeds the slot"));
  // fp16/bf16: `out` is float32 (combined in float32, not rounded: the caller rounds once).
  const bool wide = ops::is_half_float(dtype);
  const size_t osize = wide ? sizeof(float) : esize;
  const auto combine = [&](size_t done, const void* const* srcs, int k, size_t cnt) {
    if (wide) reduce_half_to_float(reinterpret_cast<float*>(dst + done * osize), srcs, k, cnt, dtype, op, prescale);
    else reduce_sources(dst + done * osize, srcs, k, cnt, dtype, op, nullptr, PostScale{}, prescale);
  };
  if (n == 1) {
    all.for_range(off, m, [&](char* user, size_t done, size_t cnt) {
      const void* src = user;
      combine(done, &src, 1, cnt);
    });
    return Status::ok();
  }
  const CallDesc d = detail::describe_sliced(dtype, op, total);
  const uint64_t e = sync_.next_step();
  KOLO_RETURN_IF_ERROR(record(sync_.prepare(e)));
  char* mine = slot(e, r);
  for (int j = 0; j < n; ++j) {
    if (j == r) continue;
    all.for_range(off + slices.lo(j), slices.len(j), [&](char* user, size_t done, size_t cnt) {
      copy_bytes(mine + (slices.lo(j) + done) * esize, user, cnt * esize);  // raw: the kernel prescales
    });
  }
  KOLO_RETURN_IF_ERROR(record(sync_.arrive(e, d)));
  KOLO_RETURN_IF_ERROR(record(sync_.wait_all(e, first)));
  const size_t my_lo = slices.lo(r);
  all.for_range(off + my_lo, slices.len(r), [&](char* user, size_t done, size_t cnt) {
    for (int j = 0; j < n; ++j) srcs_[j] = slot(e, j) + (my_lo + done) * esize;
    srcs_[r] = user;
    combine(done, srcs_.data(), n, cnt);
  });
  return Status::ok();
}

Status ShmGroup::gather_slices(std::span<const Piece> pieces, size_t off, size_t m, DType dtype,
                               const void* mine) {
  KOLO_RETURN_IF_ERROR(usable());
  const int n = opts_.local_size;
  const int r = opts_.local_rank;
  const size_t esize = dtype_size(dtype);
  const detail::Pieces all(pieces, esize);
  const detail::Slicing slices(m, n, esize);
  const auto* src = static_cast<const char*>(mine);
  const auto put = [&](int j, const char* from) {
    all.for_range(off + slices.lo(j), slices.len(j), [&](char* user, size_t done, size_t cnt) {
      copy_bytes(user, from + done * esize, cnt * esize);
    });
  };
  if (n == 1) {
    put(0, src);
    return Status::ok();
  }
  const uint64_t e = sync_.next_step();
  KOLO_RETURN_IF_ERROR(record(sync_.prepare(e)));
  copy_bytes(slot(e, r) + slices.lo(r) * esize, src, slices.len(r) * esize);
  KOLO_RETURN_IF_ERROR(record(sync_.arrive(e)));
  put(r, src);
  for (int j = 0; j < n; ++j) {
    if (j == r) continue;
    KOLO_RETURN_IF_ERROR(record(sync_.wait_for(j, e)));
    put(j, slot(e, j) + slices.lo(j) * esize);
  }
  return Status::ok();
}

}  // namespace kolo::shm

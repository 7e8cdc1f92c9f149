// The sliced allreduce across hosts (ops/shm/shm_hierarchical.h): host-local reduce-scatter,
// an exchange per slice between hosts (CrossRing), host-local allgather, pipelined over
// chunks. fp16/bf16: the host-local reduce writes float32; between hosts travel 16-bit values
// (each host's partial rounded once; a sum or average is scaled in the host-local reduce
// so that partials stay in the range of the result) or, with KOLO_CROSS_HOST_HALF_WIRE=
// float32, float32 values that each rank rounds once after the ring.
//
// Schedule, the same on every rank (the shared-memory steps must line up): for chunk c,
// first finish chunk c - kSlicedInFlight (wait for its ring, then gather_slices), then
// reduce_slice chunk c into staging buffer c % kSlicedInFlight and start its ring; at the
// end finish the chunks still in flight. While a rank waits for a local peer, the group's
// idle hook keeps its rings moving (ShmExecutor sets it), so no rank's ring waits on a peer
// that sits in a shared-memory wait, and its share of the link does not idle.
#include <algorithm>

#include "kernels/cpu_reduce.h"
#include "ops/mpi_util.h"
#include "ops/shm/shm_hierarchical.h"
#include "ops/shm/shm_pieces.h"

namespace kolo::shm {
namespace {

// Elements per chunk: the buffer in up to kSlicedInFlight equal chunks, so that the
// host-local work of one chunk overlaps the transfer of the others, of at least 512 KiB per
// local rank (each chunk costs two barriers and 2(P-1) messages between hosts, each a
// rendezvous in Open MPI above its eager limit) and at most a slot (what reduce_slice can
// stage).
size_t chunk_elements(size_t total, size_t slot_elements, int local_size, size_t esize) {
  const size_t least = std::max<size_t>(1, (size_t{512} << 10) * static_cast<size_t>(local_size) / esize);
  const size_t pieces = std::clamp<size_t>(total / least, 1, kSlicedInFlight);
  return std::max<size_t>(1, std::min(slot_elements, (total + pieces - 1) / pieces));
}

}  // namespace

Status sliced_allreduce(ShmGroup& local, const HierarchicalComms& comms, std::span<const Piece> pieces,
                        DType dtype, ReduceOp op, double prescale, double postscale) {
  KOLO_RETURN_IF_ERROR(local.health());  // after a failure the staging buffers stay MPI's
  SlicedState& st = *comms.sliced;
  const size_t esize = dtype_size(dtype);
  const int n = local.local_size();
  const int r = local.local_rank();
  size_t total = 0;
  for (const Piece& p : pieces) total += p.count;
  if (total == 0) return Status::ok();
  const size_t chunk = chunk_elements(total, local.slot_bytes() / esize, n, esize);
  const size_t chunks = (total + chunk - 1) / chunk;
  // fp16/bf16 are reduced within the host in float32. Between hosts they travel in 16 bits
  // (st.half_wire) or as float32 and are rounded once, after the ring, with the post factor
  // folded into the rounding (as on one host).
  const bool half = ops::is_half_float(dtype);
  const bool narrow_wire = half && st.half_wire;
  const DType accum = half ? DType::kFloat32 : dtype;
  const size_t most = detail::Slicing(chunk, n, esize).len(0);
  const size_t stage_bytes = most * dtype_size(accum);
  if (st.stage.size() < kSlicedInFlight) st.stage.resize(kSlicedInFlight);
  // The buffers MPI sends from and receives into grow only; each allocation is declared to
  // TSan as MPI's (ops/mpi_util.h, mpi_buffer_for_tsan).
  for (auto& b : st.stage) {
    if (b.size() < stage_bytes) {
      b.resize(stage_bytes);
      ops::mpi_buffer_for_tsan(b.data(), b.size());
    }
  }
  if (half && st.narrow.size() < kSlicedInFlight * most * esize) {
    st.narrow.resize(kSlicedInFlight * most * esize);
    ops::mpi_buffer_for_tsan(st.narrow.data(), st.narrow.size());
  }
  const auto narrowed = [&](int slot) { return st.narrow.data() + static_cast<size_t>(slot) * most * esize; };
  float factor = static_cast<float>(ops::post_factor(op, comms.global_size, postscale));
  // On the 16-bit wire a sum or average is scaled before it leaves the host (as PyTorch's
  // fp16 compression hook divides before its allreduce): an average of values near the
  // type's limit then stays finite in the partials too.
  if (narrow_wire && (op == ReduceOp::kSum || op == ReduceOp::kAverage)) {
    prescale *= factor;
    factor = 1.0f;
  }
  CrossRing::Finish finish;
  if (!half && ops::needs_postscale(op, comms.global_size, postscale)) {
    finish = [dtype, op, ranks = comms.global_size, postscale](void* seg, size_t count) {
      ops::apply_postscale(seg, count, dtype, op, ranks, postscale);
    };
  }
  const auto failed = [&](Status s) {
    st.ring.abandon();
    return local.abort(std::move(s));
  };
  const auto range = [&](size_t c, size_t* off, size_t* m) {
    *off = c * chunk;
    *m = std::min(chunk, total - *off);
  };
  const auto gather = [&](size_t c) -> Status {
    const int slot = static_cast<int>(c % kSlicedInFlight);
    Status w = st.ring.wait(slot);
    if (!w.is_ok()) return failed(w);
    size_t off = 0, m = 0;
    range(c, &off, &m);
    const void* mine = narrow_wire ? narrowed(slot) : st.stage[slot].data();
    if (half && !narrow_wire) {
      const size_t len = detail::Slicing(m, n, esize).len(r);
      ops::narrow_half(st.narrow.data(), reinterpret_cast<const float*>(mine), len, dtype, factor);
      mine = st.narrow.data();
    }
    Status s = local.gather_slices(pieces, off, m, dtype, mine);
    if (!s.is_ok()) st.ring.abandon();
    return s;
  };
  for (size_t c = 0; c < chunks; ++c) {
    if (c >= kSlicedInFlight) KOLO_RETURN_IF_ERROR(gather(c - kSlicedInFlight));
    const int slot = static_cast<int>(c % kSlicedInFlight);
    size_t off = 0, m = 0;
    range(c, &off, &m);
    Status s = local.reduce_slice(pieces, total, off, m, dtype, op, prescale, st.stage[slot].data(), c == 0);
    if (!s.is_ok()) {
      st.ring.abandon();
      return s;
    }
    const size_t mine = detail::Slicing(m, n, esize).len(r);
    s = narrow_wire ? st.ring.start_narrow(slot, reinterpret_cast<float*>(st.stage[slot].data()), narrowed(slot),
                                           mine, dtype, op, factor)
                    : st.ring.start(slot, st.stage[slot].data(), mine, accum, op, finish);
    if (s.is_ok()) s = st.ring.poll();
    if (!s.is_ok()) return failed(s);
  }
  for (size_t c = chunks > kSlicedInFlight ? chunks - kSlicedInFlight : 0; c < chunks; ++c) {
    KOLO_RETURN_IF_ERROR(gather(c));
  }
  return Status::ok();
}

}  // namespace kolo::shm

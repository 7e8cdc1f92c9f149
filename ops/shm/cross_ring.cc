// The ring allreduce between hosts: ops/shm/cross_ring.h.
#include "ops/shm/cross_ring.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "kernels/cpu_reduce.h"
#include "ops/mpi_util.h"
#include "ops/shm/shm_pieces.h"

namespace kolo::shm {

CrossRing::CrossRing(MPI_Comm comm, Liveness* liveness) : comm_(comm), liveness_(liveness) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

size_t CrossRing::seg_lo(const Op& o, int s) const {
  return detail::Slicing(o.count, size_, dtype_size(o.dtype)).lo(s);
}

Status CrossRing::start(int slot, void* buf, size_t count, DType dtype, ReduceOp op, Finish finish) {
  Op o;
  o.buf = static_cast<char*>(buf);
  o.count = count;
  o.dtype = dtype;
  o.op = op;
  o.finish = std::move(finish);
  return begin(slot, std::move(o));
}

Status CrossRing::start_narrow(int slot, float* acc, void* out, size_t count, DType half, ReduceOp op,
                               float factor) {
  if (!ops::is_half_float(half)) return Status::internal("cross-host ring: 16-bit wire for a non-16-bit type");
  Op o;
  o.buf = static_cast<char*>(out);
  o.acc = acc;
  o.factor = factor;
  o.count = count;
  o.dtype = half;
  o.op = op;
  return begin(slot, std::move(o));
}

Status CrossRing::begin(int slot, Op o) {
  if (comm_ == MPI_COMM_NULL) return Status::internal("cross-host ring used without a communicator");
  if (slot < 0 || slot >= kMaxSlots) {
    return Status::internal("cross-host ring: slot " + std::to_string(slot) + " out of range");
  }
  if (static_cast<int>(ops_.size()) <= slot) ops_.resize(static_cast<size_t>(slot) + 1);
  if (ops_[slot].active) return Status::internal("cross-host ring: slot " + std::to_string(slot) + " is still in flight");
  Op& mine = ops_[slot];
  mine = std::move(o);
  if (size_ == 1) {
    if (mine.acc != nullptr) ops::narrow_half(mine.buf, mine.acc, mine.count, mine.dtype, mine.factor);
    else if (mine.finish) mine.finish(mine.buf, mine.count);
    return Status::ok();
  }
  const size_t most = detail::Slicing(mine.count, size_, dtype_size(mine.dtype)).len(0);
  mine.active = true;
  const size_t want = static_cast<size_t>(size_) * most * dtype_size(mine.dtype);
  if (incoming_.size() <= static_cast<size_t>(slot)) incoming_.resize(static_cast<size_t>(slot) + 1);
  std::vector<char>& in = incoming_[slot];
  if (in.size() < want) {  // kept across calls: grows only, declared to TSan once per allocation
    in.resize(want);
    ops::mpi_buffer_for_tsan(in.data(), in.size());
  }
  mine.incoming = in.data();
  if (mine.acc != nullptr) mine.widened.resize(most);
  return post(slot);
}

// Step 0 (reduce-scatter): send this host's partial of segment h to host h, for every other
// h; receive every other host's partial of segment q (this host's) into its place in
// `incoming`. Step 1 (allgather): send the finished segment q to every other host; receive
// each other host's finished segment in place. Every rank cuts segments and messages alike.
Status CrossRing::post(int slot) {
  Op& o = ops_[slot];
  const int p = size_, q = rank_;
  const size_t esize = dtype_size(o.dtype);
  const size_t most = detail::Slicing(o.count, p, esize).len(0);
  const auto bytes = [&](int s) { return (seg_lo(o, s + 1) - seg_lo(o, s)) * esize; };
  const auto at_seg = [&](int s) { return o.buf + seg_lo(o, s) * esize; };
  // A segment in messages of kMessageBytes (the last shorter), all posted at once.
  const auto transfer = [&](bool send, char* mem, size_t b, int peer) -> Status {
    for (size_t at = 0; at < b || at == 0; at += kMessageBytes) {
      const int len = static_cast<int>(std::min(kMessageBytes, b - at));
      o.reqs.push_back(MPI_REQUEST_NULL);
      const int rc = send ? MPI_Isend(mem + at, len, MPI_BYTE, peer, slot, comm_, &o.reqs.back())
                          : MPI_Irecv(mem + at, len, MPI_BYTE, peer, slot, comm_, &o.reqs.back());
      if (rc != MPI_SUCCESS) return ops::mpi_status(rc, send ? "MPI_Isend (cross-host)" : "MPI_Irecv (cross-host)");
      if (b == 0) break;
    }
    return Status::ok();
  };
  o.reqs.clear();
  // Peers in the order q+1, q+2, ... (sends) and q-1, q-2, ... (receives): not all at host 0 first.
  for (int k = 1; k < p; ++k) {
    const int from = (q + p - k) % p;
    char* to = o.step == 0 ? o.incoming + static_cast<size_t>(from) * most * esize : at_seg(from);
    KOLO_RETURN_IF_ERROR(transfer(false, to, o.step == 0 ? bytes(q) : bytes(from), from));
  }
  for (int k = 1; k < p; ++k) {
    const int to = (q + k) % p;
    // 16-bit wire: this host's float32 partial of segment `to`, rounded to 16 bits, staged in
    // the result buffer (that segment is not otherwise in use until the allgather).
    if (o.step == 0 && o.acc != nullptr) {
      ops::narrow_half(at_seg(to), o.acc + seg_lo(o, to), bytes(to) / esize, o.dtype, 1.0f);
    }
    KOLO_RETURN_IF_ERROR(transfer(true, at_seg(o.step == 0 ? to : q), o.step == 0 ? bytes(to) : bytes(q), to));
  }
  return Status::ok();
}

// Segment q from every host's partial, combined in host order 0, 1, ..., P-1 whichever host
// owns it (so the bits depend on the inputs, not on where the segments fall), then scaled
// once and rounded once (16-bit wire).
void CrossRing::combine(Op& o) {
  const int p = size_, q = rank_;
  const size_t esize = dtype_size(o.dtype);
  const size_t most = detail::Slicing(o.count, p, esize).len(0);
  const size_t lo = seg_lo(o, q), len = seg_lo(o, q + 1) - lo;
  char* mine = o.buf + lo * esize;
  if (len == 0) {
    // An empty segment (fewer elements than hosts): nothing was received, and the receive
    // buffer may be unallocated (null), which memcpy and the kernels must not be handed.
    if (o.acc == nullptr && o.finish) o.finish(mine, 0);
    return;
  }
  const auto from = [&](int h) { return h == q ? mine : o.incoming + static_cast<size_t>(h) * most * esize; };
  if (o.acc != nullptr) {
    // This host's partial goes through the 16-bit format exactly as its peers' did.
    ops::narrow_half(mine, o.acc + lo, len, o.dtype, 1.0f);
    ops::widen_half(o.acc + lo, from(0), len, o.dtype, 1.0f);
    for (int h = 1; h < p; ++h) {
      ops::widen_half(o.widened.data(), from(h), len, o.dtype, 1.0f);
      ops::combine_float(o.acc + lo, o.widened.data(), len, o.op);
    }
    ops::narrow_half(mine, o.acc + lo, len, o.dtype, o.factor);
    return;
  }
  // Accumulate into host 0's values: this host's own where it is host 0, else host 0's
  // received copy (then copied into place).
  char* sum = from(0);
  for (int h = 1; h < p; ++h) ops::reduce_into(sum, from(h), len, o.dtype, o.op);
  if (sum != mine) std::memcpy(mine, sum, len * esize);
  if (o.finish) o.finish(mine, len);
}

Status CrossRing::advance(int slot, bool* progressed) {
  Op& o = ops_[slot];
  int done = 0;
  KOLO_RETURN_IF_ERROR(ops::mpi_status(MPI_Testall(static_cast<int>(o.reqs.size()), o.reqs.data(), &done,
                                                   MPI_STATUSES_IGNORE),
                                       "MPI_Testall (cross-host)"));
  if (!done) return Status::ok();
  *progressed = true;
  if (o.step == 0) combine(o);
  if (++o.step == 2) {
    o.active = false;
    return Status::ok();
  }
  return post(slot);
}

Status CrossRing::poll() {
  for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
    bool progressed = true;
    while (ops_[i].active && progressed) {
      progressed = false;
      KOLO_RETURN_IF_ERROR(advance(i, &progressed));
    }
  }
  return Status::ok();
}

Status CrossRing::wait(int slot) {
  const auto start = std::chrono::steady_clock::now();
  for (int polls = 0;; ++polls) {
    KOLO_RETURN_IF_ERROR(poll());
    if (!busy(slot)) return Status::ok();
    if (liveness_ != nullptr) KOLO_RETURN_IF_ERROR(liveness_->check("waiting in the cross-host ring allreduce"));
    if (polls >= 64 && std::chrono::steady_clock::now() - start > std::chrono::microseconds(100)) sched_yield();
  }
}

}  // namespace kolo::shm

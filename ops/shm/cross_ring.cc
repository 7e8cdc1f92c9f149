// The ring allreduce between hosts: ops/shm/cross_ring.h.
#include "ops/shm/cross_ring.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "ops/cpu_reduce.h"
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
  mine.incoming.resize(most * dtype_size(mine.dtype));
  if (mine.acc != nullptr) mine.widened.resize(most);
  return post(slot);
}

// Step s < P-1 (reduce-scatter): send segment q-s on, receive segment q-s-1 into `incoming`.
// Step P-1+t (allgather): send segment q+1-t on, receive segment q-t in place.
Status CrossRing::post(int slot) {
  Op& o = ops_[slot];
  const int p = size_, q = rank_;
  const int next = (q + 1) % p, prev = (q + p - 1) % p;
  const size_t esize = dtype_size(o.dtype);
  const auto mod = [p](int x) { return ((x % p) + p) % p; };
  int send_seg, recv_seg;
  char* recv_to;
  if (o.step < p - 1) {
    send_seg = mod(q - o.step);
    recv_seg = mod(q - o.step - 1);
    recv_to = o.incoming.data();
  } else {
    const int t = o.step - (p - 1);
    send_seg = mod(q + 1 - t);
    recv_seg = mod(q - t);
    recv_to = o.buf + seg_lo(o, recv_seg) * esize;
  }
  const auto bytes = [&](int s) { return (seg_lo(o, s + 1) - seg_lo(o, s)) * esize; };
  // Both segments in messages of kMessageBytes (the last shorter); every rank cuts alike.
  const auto parts = [](size_t b) { return std::max<size_t>(1, (b + kMessageBytes - 1) / kMessageBytes); };
  o.reqs.clear();
  const size_t rb = bytes(recv_seg), sb = bytes(send_seg);
  for (size_t k = 0, n = parts(rb); k < n; ++k) {
    const size_t at = k * kMessageBytes, len = std::min(kMessageBytes, rb - std::min(rb, at));
    o.reqs.push_back(MPI_REQUEST_NULL);
    const int rc = MPI_Irecv(recv_to + at, static_cast<int>(len), MPI_BYTE, prev, slot, comm_, &o.reqs.back());
    if (rc != MPI_SUCCESS) return ops::mpi_status(rc, "MPI_Irecv (cross-host ring)");
  }
  const char* from = o.buf + seg_lo(o, send_seg) * esize;
  // 16-bit wire: the reduce-scatter sends this host's float32 partial rounded to 16 bits
  // (staged in the result buffer, whose segment is not otherwise in use until the allgather).
  if (o.acc != nullptr && o.step < p - 1) {
    ops::narrow_half(o.buf + seg_lo(o, send_seg) * esize, o.acc + seg_lo(o, send_seg), sb / esize, o.dtype, 1.0f);
  }
  for (size_t k = 0, n = parts(sb); k < n; ++k) {
    const size_t at = k * kMessageBytes, len = std::min(kMessageBytes, sb - std::min(sb, at));
    o.reqs.push_back(MPI_REQUEST_NULL);
    const int rc = MPI_Isend(from + at, static_cast<int>(len), MPI_BYTE, next, slot, comm_, &o.reqs.back());
    if (rc != MPI_SUCCESS) return ops::mpi_status(rc, "MPI_Isend (cross-host ring)");
  }
  return Status::ok();
}

Status CrossRing::advance(int slot, bool* progressed) {
  Op& o = ops_[slot];
  int done = 0;
  KOLO_RETURN_IF_ERROR(ops::mpi_status(MPI_Testall(static_cast<int>(o.reqs.size()), o.reqs.data(), &done,
                                                   MPI_STATUSES_IGNORE),
                                       "MPI_Testall (cross-host ring)"));
  if (!done) return Status::ok();
  *progressed = true;
  const int p = size_;
  const size_t esize = dtype_size(o.dtype);
  if (o.step < p - 1) {
    const int seg = ((rank_ - o.step - 1) % p + p) % p;
    const size_t lo = seg_lo(o, seg), len = seg_lo(o, seg + 1) - lo;
    if (o.acc != nullptr) {  // 16-bit wire: combine in float32; the owner rounds once more
      ops::widen_half(o.widened.data(), o.incoming.data(), len, o.dtype, 1.0f);
      ops::combine_float(o.acc + lo, o.widened.data(), len, o.op);
      if (o.step == p - 2) ops::narrow_half(o.buf + lo * esize, o.acc + lo, len, o.dtype, o.factor);
    } else {
      ops::reduce_into(o.buf + lo * esize, o.incoming.data(), len, o.dtype, o.op);
      if (o.step == p - 2 && o.finish) o.finish(o.buf + lo * esize, len);  // the one it owns
    }
  }
  if (++o.step == 2 * (p - 1)) {
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

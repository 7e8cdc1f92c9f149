#include "ops/mpi_executor.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <tuple>

#include "kernels/cpu_reduce.h"
#include "ops/mpi_util.h"

namespace kolo::ops {
namespace {
// MPI counts are ints; broadcast moves at most this many bytes per call.
constexpr size_t kMaxBytesPerCall = size_t{1} << 30;
}  // namespace

MpiExecutor::MpiExecutor(MPI_Comm data_comm, size_t chunk_bytes, Liveness* liveness, bool ordered)
    : comm_(data_comm), liveness_(liveness), chunk_bytes_(chunk_bytes), ordered_(ordered) {
  MPI_Comm_size(comm_, &size_);
  MPI_Comm_rank(comm_, &rank_);
}

Status MpiExecutor::execute(const Response& r, std::vector<TensorEntry>& entries) {
  switch (r.type) {
    case Response::Type::kAllreduce: return allreduce(r, entries);
    case Response::Type::kBroadcast: return broadcast(r, entries);
    case Response::Type::kAllgather: return allgather(r, entries);
    case Response::Type::kAlltoall: return alltoall(r, entries);
    case Response::Type::kReducescatter: return reducescatter(r, entries);
    case Response::Type::kError: break;
  }
  return Status::internal("MPI executor given an error response");
}

// fp16/bf16, any number of tensors: a chunk at a time, the tensors' values are widened to
// float32 (times the prescale) into scratch, allreduced as MPI_FLOAT with MPI's own op, and
// narrowed back into the tensors (times the post factor) with one rounding. Twice the bytes
// on the wire, but MPI's vectorised float reduction instead of a user-defined op per
// element, and no rounding to 16 bits between ranks.
Status MpiExecutor::allreduce_half(std::span<const Span> tensors, DType t, ReduceOp op, double prescale,
                                   double postscale) {
  size_t total = 0;
  for (const Span& x : tensors) total += x.count;
  const size_t chunk = std::max<size_t>(1024, std::min(chunk_bytes_, kMaxBytesPerCall) / sizeof(float));
  wide_.resize(std::min(total, chunk));
  const float pre = static_cast<float>(prescale);
  const float f = static_cast<float>(post_factor(op, size_, postscale));
  // Calls fn(tensor bytes, offset in the chunk, count) for each run of [off, off + m).
  size_t first = 0, first_at = 0;  // where the current chunk starts: tensor index, element in it
  const auto each = [&](size_t m, auto&& fn) {
    size_t i = first, at = first_at, done = 0;
    while (done < m) {
      const size_t n = std::min(m - done, tensors[i].count - at);
      if (n > 0) fn(static_cast<std::byte*>(tensors[i].data) + at * 2, done, n);
      done += n;
      at += n;
      if (at == tensors[i].count) ++i, at = 0;
    }
    return std::pair{i, at};
  };
  while (first < tensors.size() && tensors[first].count == 0) ++first;
  for (size_t off = 0; off < total; off += chunk) {
    const size_t m = std::min(chunk, total - off);
    each(m, [&](std::byte* p, size_t done, size_t n) { widen_half(wide_.data() + done, p, n, t, pre); });
    KOLO_RETURN_IF_ERROR(allreduce_wide(m, op));
    std::tie(first, first_at) =
        each(m, [&](std::byte* p, size_t done, size_t n) { narrow_half(p, wide_.data() + done, n, t, f); });
  }
  return Status::ok();
}

Status MpiExecutor::allreduce_wide(size_t m, ReduceOp op) {
  if (ordered_ && order_matters(DType::kFloat32, op)) {  // the post factor comes when narrowing
    return ordered_allreduce(comm_, wide_.data(), m, DType::kFloat32, op == ReduceOp::kAverage ? ReduceOp::kSum : op,
                             1.0, liveness_, &order_scratch_);
  }
  MPI_Request req = MPI_REQUEST_NULL;
  KOLO_RETURN_IF_ERROR(mpi_status(MPI_Iallreduce(MPI_IN_PLACE, wide_.data(), static_cast<int>(m), MPI_FLOAT,
                                                 mpi_reduce_op(DType::kFloat32, op), comm_, &req),
                                  "MPI_Iallreduce"));
  return wait_request(&req, "MPI_Iallreduce", liveness_);
}

Status MpiExecutor::allreduce_buffer(void* buf, size_t count, DType t, ReduceOp op, double prescale,
                                     double postscale) {
  if (is_half_float(t)) {
    const Span one{buf, count};
    return allreduce_half({&one, 1}, t, op, prescale, postscale);
  }
  const size_t esize = dtype_size(t);
  const size_t chunk = std::max<size_t>(1, std::min(chunk_bytes_, kMaxBytesPerCall) / esize);
  MPI_Datatype type = mpi_dtype(t);
  MPI_Op mop = mpi_reduce_op(t, op);
  auto* base = static_cast<std::byte*>(buf);
  for (size_t off = 0; off < count; off += chunk) {
    const size_t n = std::min(chunk, count - off);
    void* p = base + off * esize;
    if (prescale != 1.0) scale_copy(p, p, n, t, prescale);
    if (ordered_ && order_matters(t, op)) {  // rank order, post-scaled by each segment's owner
      KOLO_RETURN_IF_ERROR(ordered_allreduce(comm_, p, n, t, op, postscale, liveness_, &order_scratch_));
      continue;
    }
    MPI_Request req;
    KOLO_RETURN_IF_ERROR(
        mpi_status(MPI_Iallreduce(MPI_IN_PLACE, p, static_cast<int>(n), type, mop, comm_, &req), "MPI_Iallreduce"));
    KOLO_RETURN_IF_ERROR(wait_request(&req, "MPI_Iallreduce", liveness_));
    apply_postscale(p, n, t, op, size_, postscale);
  }
  return Status::ok();
}

Status MpiExecutor::allreduce(const Response& r, std::vector<TensorEntry>& entries) {
  if (entries.size() == 1) {
    TensorView& v = entries[0].view;
    phase(entries, "MPI_ALLREDUCE");
    Status s = allreduce_buffer(v.data, static_cast<size_t>(v.num_elements()), r.dtype, r.reduce_op, r.prescale,
                            r.postscale);
    phase(entries, "");
    return s;
  }
  if (is_half_float(r.dtype)) {  // in float32 scratch, straight from and to the tensors
    spans_.clear();
    for (auto& e : entries) spans_.push_back({e.view.data, static_cast<size_t>(e.view.num_elements())});
    phase(entries, "MPI_ALLREDUCE");
    Status s = allreduce_half(spans_, r.dtype, r.reduce_op, r.prescale, r.postscale);
    phase(entries, "");
    return s;
  }
  // Fused: pack (applying prescale), reduce in pieces, unpack.
  const size_t esize = dtype_size(r.dtype);
  size_t total = 0;
  for (auto& e : entries) total += static_cast<size_t>(e.view.num_elements());
  if (fusion_.size() < total * esize) fusion_.resize(total * esize);
  phase(entries, "MEMCPY_IN_FUSION_BUFFER");
  size_t off = 0;
  for (auto& e : entries) {
    const size_t n = static_cast<size_t>(e.view.num_elements());
    scale_copy(fusion_.data() + off * esize, e.view.data, n, r.dtype, r.prescale);
    off += n;
  }
  phase(entries, "MPI_ALLREDUCE");
  Status s = allreduce_buffer(fusion_.data(), total, r.dtype, r.reduce_op, 1.0, r.postscale);
  if (!s.is_ok()) {
    phase(entries, "");
    return s;
  }
  phase(entries, "MEMCPY_OUT_FUSION_BUFFER");
  off = 0;
  for (auto& e : entries) {
    const size_t n = static_cast<size_t>(e.view.num_elements());
    std::memcpy(e.view.data, fusion_.data() + off * esize, n * esize);
    off += n;
  }
  phase(entries, "");
  return Status::ok();
}

Status MpiExecutor::broadcast(const Response& r, std::vector<TensorEntry>& entries) {
  for (auto& e : entries) {
    auto* p = static_cast<std::byte*>(e.view.data);
    const size_t bytes = e.view.num_bytes();
    for (size_t off = 0; off < bytes; off += kMaxBytesPerCall) {
      const int n = static_cast<int>(std::min(kMaxBytesPerCall, bytes - off));
      MPI_Request req;
      KOLO_RETURN_IF_ERROR(mpi_status(MPI_Ibcast(p + off, n, MPI_BYTE, r.root, comm_, &req), "MPI_Ibcast"));
      KOLO_RETURN_IF_ERROR(wait_request(&req, "MPI_Ibcast", liveness_));
    }
  }
  return Status::ok();
}

Status MpiExecutor::allgather(const Response& r, std::vector<TensorEntry>& entries) {
  TensorEntry& e = entries.at(0);
  int64_t total_rows = 0;
  const size_t row_bytes = prepare_allgather_output(r, e, &total_rows);
  Tensor& out = e.handle->extra().gathered;
  if (row_bytes == 0 || total_rows == 0) return Status::ok();
  if (row_bytes > static_cast<size_t>(INT_MAX) || total_rows > INT_MAX)
    return Status::invalid_argument("allgather \"" + r.names[0] + "\": too large for one MPI_Allgatherv");
  MPI_Datatype row;
  MPI_Type_contiguous(static_cast<int>(row_bytes), MPI_BYTE, &row);
  MPI_Type_commit(&row);
  std::vector<int> counts(r.sizes.size()), displs(r.sizes.size());
  int64_t at = 0;
  for (size_t i = 0; i < r.sizes.size(); ++i) {
    counts[i] = static_cast<int>(r.sizes[i]);
    displs[i] = static_cast<int>(at);
    at += r.sizes[i];
  }
  int rank = 0;
  MPI_Comm_rank(comm_, &rank);
  MPI_Request req;
  Status s = mpi_status(MPI_Iallgatherv(e.view.data, counts[static_cast<size_t>(rank)], row, out.bytes.data(),
                                        counts.data(), displs.data(), row, comm_, &req),
                        "MPI_Iallgatherv");
  if (s.is_ok()) s = wait_request(&req, "MPI_Iallgatherv", liveness_);
  MPI_Type_free(&row);
  return s;
}

Status MpiExecutor::alltoall(const Response& r, std::vector<TensorEntry>& entries) {
  TensorEntry& e = entries.at(0);
  std::vector<int64_t> send_rows, recv_rows;
  void* dest = nullptr;
  Status unfit;
  const size_t row_bytes = prepare_alltoall_output(r, rank_, size_, e, &send_rows, &recv_rows, &dest, &unfit);
  if (row_bytes == 0) return unfit;
  std::vector<int> sc(static_cast<size_t>(size_)), sd(sc.size()), rc(sc.size()), rd(sc.size());
  int64_t s_at = 0, r_at = 0;
  for (size_t j = 0; j < sc.size(); ++j) {
    if (s_at + send_rows[j] > INT_MAX || r_at + recv_rows[j] > INT_MAX || row_bytes > static_cast<size_t>(INT_MAX))
      return Status::invalid_argument("alltoall \"" + r.names[0] + "\": too large for one MPI_Alltoallv");
    sc[j] = static_cast<int>(send_rows[j]);
    sd[j] = static_cast<int>(s_at);
    rc[j] = static_cast<int>(recv_rows[j]);
    rd[j] = static_cast<int>(r_at);
    s_at += send_rows[j];
    r_at += recv_rows[j];
  }
  MPI_Datatype row;
  MPI_Type_contiguous(static_cast<int>(row_bytes), MPI_BYTE, &row);
  MPI_Type_commit(&row);
  phase(entries, "MPI_ALLTOALLV");
  Status s = mpi_status(MPI_Alltoallv(e.view.data, sc.data(), sd.data(), row, dest,
                                      rc.data(), rd.data(), row, comm_),
                        "MPI_Alltoallv");
  phase(entries, "");
  MPI_Type_free(&row);
  return s.is_ok() ? unfit : s;
}

// One MPI_Reduce_scatter per tensor (the grouped form's members arrive as separate responses).
Status MpiExecutor::reducescatter(const Response& r, std::vector<TensorEntry>& entries) {
  const size_t esize = dtype_size(r.dtype);
  for (TensorEntry& e : entries) {
    int64_t first_row = 0, rows = 0;
    const size_t row_elems = prepare_reducescatter_output(r, rank_, size_, e, &first_row, &rows);
    const size_t total = static_cast<size_t>(e.view.num_elements());
    if (total == 0) continue;
    std::vector<int> counts(static_cast<size_t>(size_));
    for (int j = 0; j < size_; ++j) {
      const int64_t n = reducescatter_rows(e.view.shape[0], size_, j) * static_cast<int64_t>(row_elems);
      if (n > INT_MAX)
        return Status::invalid_argument("reducescatter \"" + e.request.name + "\": too large for one MPI_Reduce_scatter");
      counts[static_cast<size_t>(j)] = static_cast<int>(n);
    }
    const size_t mine = static_cast<size_t>(rows) * row_elems;
    if (is_half_float(r.dtype)) {  // in float32 scratch, rounded once (as allreduce_half)
      wide_.resize(total + mine);
      widen_half(wide_.data(), e.view.data, total, r.dtype, static_cast<float>(r.prescale));
      phase(entries, "MPI_REDUCE_SCATTER");
      Status s = mpi_status(MPI_Reduce_scatter(wide_.data(), wide_.data() + total,
                                               counts.data(), MPI_FLOAT, mpi_reduce_op(DType::kFloat32, r.reduce_op),
                                               comm_),
                            "MPI_Reduce_scatter");
      phase(entries, "");
      KOLO_RETURN_IF_ERROR(s);
      narrow_half(e.handle->extra().gathered.bytes.data(), wide_.data() + total, mine, r.dtype,
                  static_cast<float>(post_factor(r.reduce_op, size_, r.postscale)));
      continue;
    }
    const void* in = e.view.data;
    if (r.prescale != 1.0) {
      if (scaled_.size() < total * esize) scaled_.resize(total * esize);
      scale_copy(scaled_.data(), in, total, r.dtype, r.prescale);
      in = scaled_.data();
    }
    void* out = e.handle->extra().gathered.bytes.data();
    phase(entries, "MPI_REDUCE_SCATTER");
    Status s = mpi_status(MPI_Reduce_scatter(in, out, counts.data(), mpi_dtype(r.dtype),
                                             mpi_reduce_op(r.dtype, r.reduce_op), comm_),
                          "MPI_Reduce_scatter");
    phase(entries, "");
    KOLO_RETURN_IF_ERROR(s);
    apply_postscale(out, static_cast<size_t>(rows) * row_elems, r.dtype, r.reduce_op, size_, r.postscale);
  }
  return Status::ok();
}

}  // namespace kolo::ops

#include "ops/gloo_executor.h"

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/broadcast.h>
#include <gloo/context.h>

#include <algorithm>
#include <cstring>
#include <tuple>

#include "kernels/cpu_reduce.h"
#include "ops/gloo_common.h"

namespace kolo::ops {
namespace {

// gloo::allreduce learns the element size from the pointer's type; kolo's dtypes map onto
// unsigned integers of their size, and the reduction itself is kolo's kernel for the dtype.
template <typename T>
void gloo_allreduce(const std::shared_ptr<gloo::Context>& context, void* buf, size_t count, DType t, ReduceOp op,
                    std::chrono::milliseconds timeout) {
  gloo::AllreduceOptions opts(context);
  opts.setOutput(static_cast<T*>(buf), count);
  opts.setReduceFunction([t, op](void* c, const void* a, const void* b, size_t n) { reduce_pair(c, a, b, n, t, op); });
  opts.setTimeout(timeout);
  gloo::allreduce(opts);
}

}  // namespace

GlooExecutor::GlooExecutor(std::shared_ptr<gloo::Context> context, size_t chunk_bytes,
                           std::chrono::milliseconds timeout, Liveness* liveness)
    : context_(std::move(context)), timeout_(timeout), liveness_(liveness),
      chunk_bytes_(std::max(chunk_bytes, kMinPieceBytes)) {
  rank_ = context_->rank;
  size_ = context_->size;
}

Status GlooExecutor::execute(const Response& r, std::vector<TensorEntry>& entries) {
  Status s = Status::internal("Gloo executor given an error response");
  switch (r.type) {
    case Response::Type::kAllreduce: s = allreduce(r, entries); break;
    case Response::Type::kBroadcast: s = broadcast(r, entries); break;
    case Response::Type::kAllgather: s = allgather(r, entries); break;
    case Response::Type::kAlltoall: s = alltoall(r, entries); break;
    case Response::Type::kReducescatter: s = reducescatter(r, entries); break;
    case Response::Type::kError: break;
  }
  return gloo_failure(s, liveness_, "a collective failed");
}

Status GlooExecutor::reduce_in_place(void* buf, size_t count, DType t, ReduceOp op) {
  if (count == 0 || size_ == 1) return Status::ok();
  return gloo_call("gloo::allreduce", [&] {
    switch (dtype_size(t)) {
      case 1: gloo_allreduce<uint8_t>(context_, buf, count, t, op, timeout_); break;
      case 2: gloo_allreduce<uint16_t>(context_, buf, count, t, op, timeout_); break;
      case 4: gloo_allreduce<uint32_t>(context_, buf, count, t, op, timeout_); break;
      default: gloo_allreduce<uint64_t>(context_, buf, count, t, op, timeout_); break;
    }
  });
}

// fp16/bf16 over any number of tensors, a chunk at a time: widened to float32 (times the
// prescale) into scratch, allreduced as floats, narrowed back (times the post factor) with
// one rounding — as MpiExecutor::allreduce_half.
Status GlooExecutor::allreduce_half(std::span<const Span> tensors, DType t, ReduceOp op, double prescale,
                                    double postscale) {
  size_t total = 0;
  for (const Span& x : tensors) total += x.count;
  const size_t chunk = std::max<size_t>(1024, chunk_bytes_ / sizeof(float));
  wide_.resize(std::min(total, chunk));
  const float pre = static_cast<float>(prescale);
  const float f = static_cast<float>(post_factor(op, size_, postscale));
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
    KOLO_RETURN_IF_ERROR(reduce_in_place(wide_.data(), m, DType::kFloat32, op));
    std::tie(first, first_at) =
        each(m, [&](std::byte* p, size_t done, size_t n) { narrow_half(p, wide_.data() + done, n, t, f); });
  }
  return Status::ok();
}

Status GlooExecutor::allreduce_buffer(void* buf, size_t count, DType t, ReduceOp op, double prescale,
                                      double postscale) {
  if (is_half_float(t)) {
    const Span one{buf, count};
    return allreduce_half({&one, 1}, t, op, prescale, postscale);
  }
  const size_t esize = dtype_size(t);
  const size_t chunk = std::max<size_t>(1, chunk_bytes_ / esize);
  auto* base = static_cast<std::byte*>(buf);
  for (size_t off = 0; off < count; off += chunk) {
    const size_t n = std::min(chunk, count - off);
    void* p = base + off * esize;
    if (prescale != 1.0) scale_copy(p, p, n, t, prescale);
    KOLO_RETURN_IF_ERROR(reduce_in_place(p, n, t, op));
    apply_postscale(p, n, t, op, size_, postscale);
  }
  return Status::ok();
}

Status GlooExecutor::allreduce(const Response& r, std::vector<TensorEntry>& entries) {
  if (entries.size() == 1) {
    TensorView& v = entries[0].view;
    phase(entries, "GLOO_ALLREDUCE");
    Status s = allreduce_buffer(v.data, static_cast<size_t>(v.num_elements()), r.dtype, r.reduce_op, r.prescale,
                                r.postscale);
    phase(entries, "");
    return s;
  }
  if (is_half_float(r.dtype)) {
    spans_.clear();
    for (auto& e : entries) spans_.push_back({e.view.data, static_cast<size_t>(e.view.num_elements())});
    phase(entries, "GLOO_ALLREDUCE");
    Status s = allreduce_half(spans_, r.dtype, r.reduce_op, r.prescale, r.postscale);
    phase(entries, "");
    return s;
  }
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
  phase(entries, "GLOO_ALLREDUCE");
  Status s = allreduce_buffer(fusion_.data(), total, r.dtype, r.reduce_op, 1.0, r.postscale);
  if (s.is_ok()) {
    phase(entries, "MEMCPY_OUT_FUSION_BUFFER");
    off = 0;
    for (auto& e : entries) {
      const size_t n = static_cast<size_t>(e.view.num_elements());
      std::memcpy(e.view.data, fusion_.data() + off * esize, n * esize);
      off += n;
    }
  }
  phase(entries, "");
  return s;
}

Status GlooExecutor::broadcast(const Response& r, std::vector<TensorEntry>& entries) {
  if (size_ == 1) return Status::ok();
  for (auto& e : entries) {
    const size_t bytes = e.view.num_bytes();
    if (bytes == 0) continue;
    KOLO_RETURN_IF_ERROR(gloo_call("gloo::broadcast", [&] {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(static_cast<uint8_t*>(e.view.data), bytes);
      opts.setRoot(r.root);
      opts.setTimeout(timeout_);
      gloo::broadcast(opts);
    }));
  }
  return Status::ok();
}

Status GlooExecutor::allgather(const Response& r, std::vector<TensorEntry>& entries) {
  TensorEntry& e = entries.at(0);
  int64_t total_rows = 0;
  const size_t row_bytes = prepare_allgather_output(r, e, &total_rows);
  Tensor& out = e.handle->extra().gathered;
  if (row_bytes == 0 || total_rows == 0) return Status::ok();
  std::vector<size_t> bytes(r.sizes.size());
  for (size_t i = 0; i < r.sizes.size(); ++i) bytes[i] = static_cast<size_t>(r.sizes[i]) * row_bytes;
  if (size_ == 1) {
    std::memcpy(out.bytes.data(), e.view.data, bytes[0]);
    return Status::ok();
  }
  phase(entries, "GLOO_ALLGATHERV");
  Status s = gloo_call("gloo::allgatherv", [&] {
    gloo::AllgathervOptions opts(context_);
    opts.setInput(static_cast<uint8_t*>(e.view.data), bytes[static_cast<size_t>(rank_)]);
    opts.setOutput(reinterpret_cast<uint8_t*>(out.bytes.data()), bytes);
    opts.setTimeout(timeout_);
    gloo::allgatherv(opts);
  });
  phase(entries, "");
  return s;
}

Status GlooExecutor::alltoall(const Response& r, std::vector<TensorEntry>& entries) {
  TensorEntry& e = entries.at(0);
  std::vector<int64_t> send_rows, recv_rows;
  void* dest = nullptr;
  Status unfit;
  const size_t row_bytes = prepare_alltoall_output(r, rank_, size_, e, &send_rows, &recv_rows, &dest, &unfit);
  if (row_bytes == 0) return unfit;
  std::vector<int64_t> send_bytes(send_rows.size()), recv_bytes(recv_rows.size());
  int64_t send_total = 0, recv_total = 0;
  for (size_t j = 0; j < send_rows.size(); ++j) {
    send_bytes[j] = send_rows[j] * static_cast<int64_t>(row_bytes);
    recv_bytes[j] = recv_rows[j] * static_cast<int64_t>(row_bytes);
    send_total += send_bytes[j];
    recv_total += recv_bytes[j];
  }
  // Gloo wants a buffer even where nothing moves.
  static uint8_t nothing = 0;
  auto* in = send_total > 0 ? static_cast<uint8_t*>(e.view.data) : &nothing;
  auto* out = recv_total > 0 ? static_cast<uint8_t*>(dest) : &nothing;
  phase(entries, "GLOO_ALLTOALLV");
  Status s = gloo_call("gloo::alltoallv", [&] {
    if (size_ == 1) {
      if (send_total > 0) std::memmove(out, in, static_cast<size_t>(send_total));
      return;
    }
    gloo::AlltoallvOptions opts(context_);
    opts.setInput(in, send_bytes);
    opts.setOutput(out, recv_bytes);
    opts.setTimeout(timeout_);
    gloo::alltoallv(opts);
  });
  phase(entries, "");
  return s.is_ok() ? unfit : s;
}

// Each tensor: allreduce a prescaled copy of all of it (float32 for fp16/bf16), keep this
// rank's rows, apply the post factor to them.
Status GlooExecutor::reducescatter(const Response& r, std::vector<TensorEntry>& entries) {
  const size_t esize = dtype_size(r.dtype);
  for (TensorEntry& e : entries) {
    int64_t first_row = 0, rows = 0;
    const size_t row_elems = prepare_reducescatter_output(r, rank_, size_, e, &first_row, &rows);
    const size_t total = static_cast<size_t>(e.view.num_elements());
    if (total == 0) continue;
    const size_t first = static_cast<size_t>(first_row) * row_elems, mine = static_cast<size_t>(rows) * row_elems;
    void* out = e.handle->extra().gathered.bytes.data();
    phase(entries, "GLOO_REDUCE_SCATTER");
    if (is_half_float(r.dtype)) {
      wide_.resize(total);
      widen_half(wide_.data(), e.view.data, total, r.dtype, static_cast<float>(r.prescale));
      Status s = reduce_in_place(wide_.data(), total, DType::kFloat32, r.reduce_op);
      phase(entries, "");
      KOLO_RETURN_IF_ERROR(s);
      narrow_half(out, wide_.data() + first, mine, r.dtype,
                  static_cast<float>(post_factor(r.reduce_op, size_, r.postscale)));
      continue;
    }
    if (fusion_.size() < total * esize) fusion_.resize(total * esize);
    scale_copy(fusion_.data(), e.view.data, total, r.dtype, r.prescale);
    Status s = reduce_in_place(fusion_.data(), total, r.dtype, r.reduce_op);
    phase(entries, "");
    KOLO_RETURN_IF_ERROR(s);
    if (mine > 0) std::memcpy(out, fusion_.data() + first * esize, mine * esize);  // out may be null with no rows
    apply_postscale(out, mine, r.dtype, r.reduce_op, size_, r.postscale);
  }
  return Status::ok();
}

}  // namespace kolo::ops

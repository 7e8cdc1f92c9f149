// core/executor.h — the interface every backend implements to run one (possibly fused)
// collective that rank 0 has scheduled. The runtime keeps executors in an ordered list and
// gives each response to the first one that accepts it (e.g. shared memory before MPI).
//
// execute() is called on every rank with the same response, in the same order; it must
// either finish the collective on all ranks or return an error on this rank (the caller
// fails the handles). For allgather it fills each entry's handle->gathered.
// Thread safety: called only from the coordinator thread.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "core/handle_state.h"
#include "core/message.h"
#include "core/timeline.h"
#include "core/tensor_queue.h"
#include "kolo/collectives.h"
#include "kolo/status.h"

namespace kolo {

// Allgather: sizes the handle's output tensor from the response (the rows of every rank,
// in rank order) and returns the bytes of one row; `*total_rows` gets the row count.
inline size_t prepare_allgather_output(const Response& r, TensorEntry& e, int64_t* total_rows) {
  const Shape& shape = e.view.shape;
  const size_t row_bytes =
      static_cast<size_t>(num_elements(Shape(shape.begin() + 1, shape.end()))) * dtype_size(r.dtype);
  *total_rows = 0;
  for (int64_t s : r.sizes) *total_rows += s;
  Tensor& out = e.handle->extra().gathered;
  out.dtype = r.dtype;
  out.shape = shape;
  out.shape[0] = *total_rows;
  out.bytes.resize(static_cast<size_t>(*total_rows) * row_bytes);
  return row_bytes;
}

// Why the caller's alltoall output `out` has no room for the `rows` rows received
// (`recv_rows` per rank, for the message), or ok. What needs no received splits (dtype,
// trailing dimensions, overlap) was checked at submit (HandleState::into_error).
inline Status alltoall_into_problem(const std::string& name, const TensorView& out, int64_t rows,
                                    const std::vector<int64_t>& recv_rows) {
  if (out.shape[0] >= rows) return Status::ok();
  return Status::invalid_argument("alltoall \"" + name + "\": output " + std::string(dtype_name(out.dtype)) +
                                  shape_string(out.shape) + " has room for " + std::to_string(out.shape[0]) +
                                  " rows; the received splits " + shape_string(recv_rows) + " add up to " +
                                  std::to_string(rows));
}

// Alltoall: fills rows sent to / received from each rank for `rank` of `size` from the
// response's matrix (rows src -> dst), sets the handle's received splits and returns the
// bytes of one row. *dest gets where the received rows go: the caller's output
// (HandleState::into) when it can take them, else the handle's own result, sized here.
// When the caller's output cannot take them, *unfit says why (naming the tensor): the
// executor still runs the exchange (into the handle's result), so that no peer waits on
// this rank, and returns *unfit afterwards.
inline size_t prepare_alltoall_output(const Response& r, int rank, int size, TensorEntry& e,
                                      std::vector<int64_t>* send_rows, std::vector<int64_t>* recv_rows,
                                      void** dest, Status* unfit) {
  const Shape& shape = e.view.shape;
  const size_t row_bytes =
      static_cast<size_t>(num_elements(Shape(shape.begin() + 1, shape.end()))) * dtype_size(r.dtype);
  send_rows->assign(static_cast<size_t>(size), 0);
  recv_rows->assign(static_cast<size_t>(size), 0);
  int64_t total = 0;
  for (int j = 0; j < size; ++j) {
    (*send_rows)[j] = r.sizes[static_cast<size_t>(rank) * size + j];
    (*recv_rows)[j] = r.sizes[static_cast<size_t>(j) * size + rank];
    total += (*recv_rows)[j];
  }
  detail::HandleExtra& x = e.handle->extra();
  x.received_splits = *recv_rows;
  *unfit = Status::ok();
  if (x.has_into) {
    *unfit = x.into_error.is_ok() ? alltoall_into_problem(e.request.name, x.into, total, *recv_rows) : x.into_error;
    if (unfit->is_ok()) {
      *dest = x.into.data;
      return row_bytes;
    }
  }
  Tensor& out = x.gathered;
  out.dtype = r.dtype;
  out.shape = shape;
  out.shape[0] = total;
  out.bytes.resize(static_cast<size_t>(total) * row_bytes);
  *dest = out.bytes.data();
  return row_bytes;
}

// Reducescatter: sizes the handle's output to `rank`'s rows (reducescatter_rows) and returns
// the elements of one row; *first_row gets the index of rank's first row.
inline size_t prepare_reducescatter_output(const Response& r, int rank, int size, TensorEntry& e,
                                           int64_t* first_row, int64_t* rows) {
  const Shape& shape = e.view.shape;
  const size_t row_elems = static_cast<size_t>(num_elements(Shape(shape.begin() + 1, shape.end())));
  *rows = reducescatter_rows(shape[0], size, rank, first_row);
  Tensor& out = e.handle->extra().gathered;
  out.dtype = r.dtype;
  out.shape = shape;
  out.shape[0] = *rows;
  out.bytes.resize(static_cast<size_t>(*rows) * row_elems * dtype_size(r.dtype));
  return row_elems;
}

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const char* name() const = 0;
  // Whether this executor runs `response` (decided from data every rank has, so that all
  // ranks choose the same executor).
  virtual bool accepts(const Response& response) const = 0;
  virtual Status execute(const Response& response, std::vector<TensorEntry>& entries) = 0;

  // Autotune: the size of the pieces CPU reductions are cut into changes. Called on every
  // rank between the same two response lists. Executors that do not chunk ignore it.
  virtual void set_cpu_chunk_bytes(size_t /*bytes*/) {}

  // Rank 0's timeline, when enabled; executors report their phases through phase().
  void set_timeline(Timeline* t) { timeline_ = t; }

 protected:
  // Opens `name` on every entry's track (closing the previous phase opened here, if any);
  // an empty name just closes it.
  void phase(const std::vector<TensorEntry>& entries, const char* name) {
    if (!timeline_ || !timeline_->enabled()) return;
    for (const auto& e : entries) {
      if (phase_open_) timeline_->end(e.request.name);
      if (name && *name) timeline_->begin(e.request.name, name);
    }
    phase_open_ = name && *name;
  }

 private:
  Timeline* timeline_ = nullptr;
  bool phase_open_ = false;
};

}  // namespace kolo

// kolo/collectives.h — the collectives training code submits.
//
// Every call names its tensor. Names identify one collective in flight and must be the
// same on every rank. Submitting a name again before its handle on this rank completed is
// refused at once on this rank (the new handle fails with an invalid-argument error; the
// peers are not told); the collective already in flight under that name is unaffected on
// every rank. A name may be reused as soon as its handle has completed. The coordinator
// thread negotiates which names every rank has submitted, fuses small tensors, and executes
// them in one order on all ranks.
// Invalid arguments that one rank can judge alone (empty name, negative dimension, null
// data, non-finite scale factors, a broadcast root outside [0, size)) fail the handle at once.
//
// REQUIRES: kolo::init() was called.
// Memory: the view's memory must stay valid and untouched until the Handle completes;
// kolo never takes ownership of it.
// Thread safety: any thread may submit, concurrently with others.
#pragma once

#include <string>

#include "kolo/handle.h"
#include "kolo/tensor.h"

namespace kolo {

struct AllreduceOptions {
  ReduceOp op = ReduceOp::kAverage;
  double prescale = 1.0;   // multiply inputs before reducing
  double postscale = 1.0;  // multiply the result after reducing
};

// In place: on completion `tensor` holds the reduction over all ranks. fp16/bf16 tensors are
// reduced in float32 on CPU: each rank's values times the prescale, combined in float32,
// times the postscale (and 1/size for kAverage), rounded to 16 bits once — so an average
// is representable whenever the result is, even where the sum would overflow.
Handle allreduce_async(const TensorView& tensor, const std::string& name,
                       const AllreduceOptions& options = {});
Handle allreduce_async(const TensorView& tensor, const std::string& name, ReduceOp op,
                       double prescale = 1.0, double postscale = 1.0);
void allreduce(const TensorView& tensor, const std::string& name,
               const AllreduceOptions& options = {});

// In place: on completion every rank's `tensor` holds root's values.
Handle broadcast_async(const TensorView& tensor, int root, const std::string& name);
void broadcast(const TensorView& tensor, int root, const std::string& name);

// Concatenates every rank's `input` along the first dimension, in rank order. The first
// dimension may differ per rank; the others must agree. The result is owned by the handle
// (Handle::gathered()) or returned by the blocking form.
Handle allgather_async(const TensorView& input, const std::string& name);
Tensor allgather(const TensorView& input, const std::string& name);

// Blocks until every rank has called barrier (negotiated like any collective).
void barrier(const std::string& name = "kolo.barrier");

}  // namespace kolo

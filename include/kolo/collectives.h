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

// In place: on completion `tensor` holds the reduction over all ranks.
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

// For uneven data (as Horovod's hvd.join() and PyTorch DDP's Join): a rank that has run
// out of data calls join(). Until every rank has joined, this rank takes part in the other
// ranks' collectives without data of its own:
//   - allreduce: it contributes the op's identity (0 for sum/average, 1 for product, the
//     largest value for min, the lowest for max); an average divides by the number of
//     ranks that contributed (size() minus the ranks joined at the time), as Horovod does;
//   - allgather: it contributes no rows;
//   - broadcast: it receives the root's data and discards it; a broadcast whose root has
//     joined fails on every rank;
//   - GPU tensors: a collective with a joined rank fails on every rank (CPU only for now).
// Blocks until every rank has joined and returns, on every rank, the last rank to join;
// afterwards every rank is out of the joined state (a next epoch may join again). While
// this rank is in join(), collectives submitted on it (from other threads) are refused.
// join() waits as long as some rank has not joined (as hvd.join() does); the stall
// inspector reports the collectives the joined ranks are waiting on meanwhile.
// Thread safety: one join() per rank at a time; a second concurrent call throws.
int join();

}  // namespace kolo

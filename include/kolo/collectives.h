// kolo/collectives.h — the collectives training code submits: allreduce, broadcast,
// allgather, alltoall, reducescatter, their grouped forms and barrier.
//
// Every call names its tensor, or lets kolo name it (the forms without a name argument:
// see "Automatic names" below). Names identify one collective in flight and must be the
// same on every rank. Submitting a name again before its handle on this rank completed is
// refused at once on this rank (the new handle fails with an invalid-argument error; the
// peers are not told); the collective already in flight under that name is unaffected on
// every rank. A name may be reused as soon as its handle has completed. The coordinator
// thread negotiates which names every rank has submitted, fuses small tensors, and executes
// them in one order on all ranks.
// Invalid arguments that one rank can judge alone (empty name, negative dimension, null
// data, non-finite scale factors, a broadcast root outside [0, size)) fail the handle at once.
//
// Process sets (kolo/process_set.h): every collective takes one — AllreduceOptions::
// process_set, or a last `process_set` argument — and runs among its members only (the
// global set, every rank, by default). "Rank" and "size" below then mean the rank within the
// set and the set's size, except a broadcast root, which stays a job rank (as in Horovod).
// A submission from a rank outside the set, or to a set not registered, fails at once on
// that rank. A name identifies one collective in flight per rank: the same name may be in
// flight on two disjoint sets at once, not twice on one rank.
//
// REQUIRES: kolo::init() was called.
// Memory: the view's memory must stay valid and untouched until the Handle completes;
// kolo never takes ownership of it.
// Thread safety: any thread may submit, concurrently with others.
//
// Automatic names: a call without a name is named after its call site and how many times
// this process has called that site for that collective:
//   "kolo.auto.<collective>.<file>:<line>:<column>.<n>"   (n = 0, 1, 2, ... per site)
// Ranks that run the same program through the same call sites the same number of times get
// the same names, whatever the order their threads reach different sites in. A rank that
// calls a site more or fewer times than its peers desynchronises the names: the extra call
// stalls (kolo's stall warning names it). Name tensors yourself where ranks differ.
#pragma once

#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

#include "kolo/handle.h"
#include "kolo/process_set.h"
#include "kolo/tensor.h"

namespace kolo {

struct AllreduceOptions {
  ReduceOp op = ReduceOp::kAverage;
  double prescale = 1.0;   // multiply inputs before reducing
  double postscale = 1.0;  // multiply the result after reducing
  ProcessSet process_set{};  // the ranks taking part (default: every rank)
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
Handle broadcast_async(const TensorView& tensor, int root, const std::string& name,
                       const ProcessSet& process_set = {});
void broadcast(const TensorView& tensor, int root, const std::string& name, const ProcessSet& process_set = {});

// Concatenates every rank's `input` along the first dimension, in rank order. The first
// dimension may differ per rank; the others must agree. The result is owned by the handle
// (Handle::gathered()) or returned by the blocking form.
Handle allgather_async(const TensorView& input, const std::string& name, const ProcessSet& process_set = {});
Tensor allgather(const TensorView& input, const std::string& name, const ProcessSet& process_set = {});

// Out of place: on completion `output` holds the reduction of every rank's `input`, which
// is left unchanged. `output` must have input's dtype, element count and device; CPU only
// (GPU tensors: use the in-place form). The input is copied into `output` on the calling
// thread before the collective is queued; both must stay valid until the handle completes.
Handle allreduce_async(const TensorView& input, const TensorView& output, const std::string& name,
                       const AllreduceOptions& options = {});
void allreduce(const TensorView& input, const TensorView& output, const std::string& name,
               const AllreduceOptions& options = {});
// Out of place: `output` gets root's `input` on every rank (root's own output included).
Handle broadcast_async(const TensorView& input, const TensorView& output, int root, const std::string& name,
                       const ProcessSet& process_set = {});
void broadcast(const TensorView& input, const TensorView& output, int root, const std::string& name,
               const ProcessSet& process_set = {});

// Alltoall: this rank sends rows [s_0 + ... + s_{j-1}, ... + s_j) of `input`'s first
// dimension to rank j, where s = `splits` (one entry per rank, each >= 0, adding up to
// input.shape[0]; zeros allowed, and every rank may split differently). The result is the
// rows received from ranks 0, 1, ... laid end to end (its first dimension is their sum; the
// other dimensions are input's, which must agree across ranks); Handle::received_splits()
// says how many rows came from each rank. Splits that do not add up, a wrong number of them,
// or disagreeing dtypes/shapes fail the collective on every rank with a message naming the
// ranks and values. The forms without `splits` split evenly: input.shape[0] / size rows to
// every rank (shape[0] must be a multiple of size, on every rank).
// The result is owned by the handle (Handle::output()) or returned by the blocking form.
Handle alltoall_async(const TensorView& input, const std::vector<int64_t>& splits, const std::string& name,
                      const ProcessSet& process_set = {});
Handle alltoall_async(const TensorView& input, const std::string& name, const ProcessSet& process_set = {});
Tensor alltoall(const TensorView& input, const std::vector<int64_t>& splits, const std::string& name,
                std::vector<int64_t>* received_splits = nullptr, const ProcessSet& process_set = {});
Tensor alltoall(const TensorView& input, const std::string& name, const ProcessSet& process_set = {});
// Alltoall into `output` (CPU tensors only): as above, but the rows received land in the
// first rows of `output`, which must have input's dtype and dimensions after the first,
// room for every row received (a first dimension of at least their sum; the rows after
// them are left alone), and must not overlap `input`. Its memory must stay valid and
// untouched until the handle completes. The handle then holds no result (output() is an
// empty tensor); received_splits() says how many rows came from each rank. Where `output`
// lies in allocate_shared memory (kolo/memory.h) the peers write their rows straight into
// it; elsewhere the rows still cross once where they can (read from the peers' inputs).
// An output this rank can judge unusable alone (null, a negative dimension, a scalar, on a
// GPU, another dtype than input's, other dimensions after the first, overlapping input
// anywhere) is found at submit, and one too small for the rows received when the collective
// runs. Either way this rank still takes part in the exchange, so its peers get their rows
// and succeed (nobody waits for it); its own rows land in a result of kolo's, which is
// dropped, `output` is not written, and its handle fails with a message naming the tensor,
// the output and what is wrong (the received splits, for room).
Handle alltoall_async(const TensorView& input, const TensorView& output, const std::vector<int64_t>& splits,
                      const std::string& name, const ProcessSet& process_set = {});
Handle alltoall_async(const TensorView& input, const TensorView& output, const std::string& name,
                      const ProcessSet& process_set = {});
void alltoall(const TensorView& input, const TensorView& output, const std::vector<int64_t>& splits,
              const std::string& name, std::vector<int64_t>* received_splits = nullptr,
              const ProcessSet& process_set = {});
void alltoall(const TensorView& input, const TensorView& output, const std::string& name,
              const ProcessSet& process_set = {});

// Reducescatter: reduces `input` (the same shape on every rank, at least one dimension) over
// all ranks with options.op / prescale / postscale as allreduce does (kAverage by default, as
// Horovod), and leaves rank r the rows reducescatter_rows(shape[0], size, r) of the result.
// Uneven first dimensions follow Horovod: the first shape[0] % size ranks get one row more.
// The result (shape [rows, input.shape[1:]...]) is owned by the handle (Handle::output()) or
// returned by the blocking form; `input` is not modified.
Handle reducescatter_async(const TensorView& input, const std::string& name, const AllreduceOptions& options = {});
Tensor reducescatter(const TensorView& input, const std::string& name, const AllreduceOptions& options = {});
// The rows of a first dimension of `dim0` that rank `rank` of `size` receives, and (when
// `first_row` is given) the index of the first of them.
int64_t reducescatter_rows(int64_t dim0, int size, int rank, int64_t* first_row = nullptr);

// Grouped collectives: the tensors are negotiated and executed as one unit — none runs on
// any rank before all of them are ready on every rank (allreduces of a group are fused
// together as far as the fusion threshold allows). Member i is named "<name>[i]". If any
// member cannot run (dtype/shape/op mismatch, or ranks passing groups of different sizes)
// every member fails on every rank, with the message naming the member at fault. One handle
// for the group: it completes when every member has; outputs()[i] is member i's result.
Handle grouped_allreduce_async(const std::vector<TensorView>& tensors, const std::string& name,
                               const AllreduceOptions& options = {});
void grouped_allreduce(const std::vector<TensorView>& tensors, const std::string& name,
                       const AllreduceOptions& options = {});
Handle grouped_allgather_async(const std::vector<TensorView>& inputs, const std::string& name,
                               const ProcessSet& process_set = {});
std::vector<Tensor> grouped_allgather(const std::vector<TensorView>& inputs, const std::string& name,
                                      const ProcessSet& process_set = {});
Handle grouped_reducescatter_async(const std::vector<TensorView>& inputs, const std::string& name,
                                   const AllreduceOptions& options = {});
std::vector<Tensor> grouped_reducescatter(const std::vector<TensorView>& inputs, const std::string& name,
                                          const AllreduceOptions& options = {});

// Blocks until every rank (of `process_set`) has called barrier (negotiated like any collective).
void barrier(const std::string& name = "kolo.barrier", const ProcessSet& process_set = {});

// The automatic name for a call of `kind` at `site` (see "Automatic names"); counts the call.
std::string auto_name(OpKind kind, const std::source_location& site);

// The forms without a name: named by auto_name at the caller's site.
using CallSite = std::source_location;
Handle allreduce_async(const TensorView& tensor, const AllreduceOptions& options = {},
                       CallSite site = CallSite::current());
void allreduce(const TensorView& tensor, const AllreduceOptions& options = {}, CallSite site = CallSite::current());
Handle broadcast_async(const TensorView& tensor, int root, CallSite site = CallSite::current());
void broadcast(const TensorView& tensor, int root, CallSite site = CallSite::current());
Handle allgather_async(const TensorView& input, CallSite site = CallSite::current());
Tensor allgather(const TensorView& input, CallSite site = CallSite::current());
// Pass `splits` as a std::vector<int64_t> (a braced list would also read as a name).
Handle alltoall_async(const TensorView& input, const std::vector<int64_t>& splits,
                      CallSite site = CallSite::current());
Handle alltoall_async(const TensorView& input, CallSite site = CallSite::current());
Handle reducescatter_async(const TensorView& input, const AllreduceOptions& options = {},
                           CallSite site = CallSite::current());
Tensor reducescatter(const TensorView& input, const AllreduceOptions& options = {},
                     CallSite site = CallSite::current());
Handle grouped_allreduce_async(const std::vector<TensorView>& tensors, const AllreduceOptions& options = {},
                               CallSite site = CallSite::current());

// For uneven data (as Horovod's hvd.join() and PyTorch DDP's Join): a rank that has run
// out of data calls join(). Until every rank has joined, this rank takes part in the other
// ranks' collectives without data of its own:
//   - allreduce: it contributes the op's identity (0 for sum/average, 1 for product, the
//     largest value for min, the lowest for max); an average divides by the number of
//     ranks that contributed (size() minus the ranks joined at the time), as Horovod does;
//   - allgather: it contributes no rows;
//   - broadcast: it receives the root's data and discards it; a broadcast whose root has
//     joined fails on every rank;
//   - grouped allreduce/allgather: as their members;
//   - alltoall, reducescatter and GPU tensors: a collective with a joined rank fails on
//     every rank (not supported yet).
// Blocks until every rank has joined and returns, on every rank, the last rank to join;
// afterwards every rank is out of the joined state (a next epoch may join again). While
// this rank is in join(), collectives submitted on it (from other threads) are refused.
// join() waits as long as some rank has not joined (as hvd.join() does); the stall
// inspector reports the collectives the joined ranks are waiting on meanwhile.
// Thread safety: one join() per rank at a time; a second concurrent call throws.
int join();
// join() without blocking: the handle completes when every rank has joined (its
// last_joined_rank() is then join()'s result). The rank is in the joined state from this
// call until the handle completes; a second join_async() or join() meanwhile throws.
Handle join_async();

}  // namespace kolo

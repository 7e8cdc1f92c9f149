// core/message.h — what ranks tell rank 0 (Request) and what rank 0 answers (Response),
// and their binary codec. The codec is the only place that knows the wire format; decoding
// never trusts its input (every length is bounds-checked) and reports a Status instead.
//
// Protocol (see docs/runtime.md): every rank sends RequestLists to rank 0; rank 0 sends
// every rank the same sequence of ResponseLists; every rank executes each list in order.
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "kolo/tensor.h"
#include "kolo/types.h"

namespace kolo {

// One rank's submission of one named collective.
struct Request {
  int32_t rank = 0;
  OpKind kind = OpKind::kAllreduce;
  ReduceOp reduce_op = ReduceOp::kSum;
  DType dtype = DType::kFloat32;
  Device device = Device::cpu();
  int32_t root = 0;  // broadcast only
  double prescale = 1.0;
  double postscale = 1.0;
  Shape shape;
  std::string name;
  // Alltoall: rows (first-dimension slices) this rank sends to each rank, in rank order;
  // empty asks for the even split (shape[0] / size rows to every rank).
  std::vector<int64_t> splits;
  // Grouped collectives: the group's name and its number of members (empty / 0: no group).
  // Every member of a group is held by rank 0 until all of them are ready on every rank.
  std::string group;
  int32_t group_size = 0;
  // The process set (core/process_set.h) this collective runs on: 0 = every rank. Rank 0
  // negotiates each set apart; `rank` stays the job-wide rank.
  int32_t process_set = 0;
  // Non-empty: this rank refused the submission (a bad root, non-finite scale, empty splits,
  // ... : what it could judge alone) and sends this stand-in so that its peers fail the
  // collective too instead of waiting for it. The text is the refusal this rank's handle
  // fails with; rank 0 fails the name on every rank with it (docs/correctness.md).
  std::string refused;

  bool operator==(const Request&) const = default;
};

// A request on a process set other than the global one, named by its id in that set's
// response cache (core/response_cache.h).
struct CachedInSet {
  int32_t process_set = 0;
  uint32_t id = 0;
  bool operator==(const CachedInSet&) const = default;
};

struct RequestList {
  std::vector<Request> requests;
  bool shutdown = false;      // this rank asks the job's runtime to stop
  bool shutdown_ack = false;  // this rank saw rank 0's shutdown and sends nothing more
  std::string shutdown_reason;  // why this rank asks (empty: an ordinary kolo::shutdown())
  // Requests rank 0 already knows, by response-cache id (core/response_cache.h).
  std::vector<uint32_t> cached;
  // The same for requests on other process sets, each by (set, id in the set's cache).
  std::vector<CachedInSet> set_cached;
  // kolo::join(): this rank has no more data (sent after this list's requests are counted).
  bool join = false;
  bool operator==(const RequestList&) const = default;
};

// One collective every rank executes: a single tensor or several fused ones.
struct Response {
  enum class Type : uint8_t {
    kAllreduce = 0,
    kBroadcast = 1,
    kAllgather = 2,
    kError = 3,
    kAlltoall = 4,
    kReducescatter = 5,
  };
  static constexpr int kNumTypes = 6;
  Type type = Type::kAllreduce;
  std::vector<std::string> names;  // tensors, in buffer order
  DType dtype = DType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  Device device = Device::cpu();
  int32_t root = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  // kAllreduce, kReducescatter: element count of each tensor. kAllgather: first dimension
  // of each rank. kAlltoall: the size x size matrix of rows, sizes[src * size + dst] = rows
  // rank src sends to rank dst.
  std::vector<int64_t> sizes;
  std::string error;  // kError: the message every rank's handle fails with
  // kError only: the job ranks whose collective it ends, ascending. Empty: every rank that
  // submitted the names (rank 0 had heard from all of them). Non-empty when rank 0 ends a
  // collective before every rank's request for it arrived (a cross-set deadlock, a set it
  // does not know): a rank not listed keeps its submission, which rank 0 has not counted
  // yet and settles when it arrives (MessageTable::fail_pending, docs/correctness.md).
  std::vector<int32_t> ranks;
  // kolo::join(): ranks that have joined and did not submit these tensors, ascending. They
  // take part with the op's identity (no rows for allgather, a discarded copy for
  // broadcast). Empty in the common case. Fusion merges only equal sets.
  std::vector<int32_t> joined;
  // Allgather with joined ranks: the dimensions after the first (what a joined rank, which
  // has no tensor of its own, needs to size its part of the exchange).
  std::vector<int64_t> row_shape;
  // The process set it runs on (0 = every rank). Ranks outside the set skip the response;
  // for a set, `root`, the allgather `sizes` and the alltoall matrix are indexed by the
  // rank within the set (its position in the set's sorted ranks), as the executors of the
  // set's communicator count them. Fusion merges only responses of one set.
  int32_t process_set = 0;

  bool operator==(const Response&) const = default;
};

// Sets r's dtype, reduce op, device, root and scale factors to q's (what a response for q
// carries of its request beyond names and sizes).
inline void copy_op_fields(const Request& q, Response* r) {
  r->dtype = q.dtype;
  r->reduce_op = q.reduce_op;
  r->device = q.device;
  r->root = q.root;
  r->prescale = q.prescale;
  r->postscale = q.postscale;
}

struct ResponseList {
  std::vector<Response> responses;
  bool shutdown = false;
  std::string shutdown_reason;
  // Autotune: when set, every rank switches to these values after executing this list.
  bool has_params = false;
  uint64_t fusion_threshold_bytes = 0;
  double cycle_time_ms = 0;
  uint64_t cpu_chunk_bytes = 0;
  // kolo::join(): every rank has joined; after this list's responses every rank's join()
  // returns `last_joined` and the job leaves the joined state.
  bool join_done = false;
  int32_t last_joined = -1;
  // The fast path (core/fast_board.h, docs/runtime.md): names every rank must negotiate
  // through rank 0 until they next execute (a rank holds them on its host's board); and
  // `fast_pause`: every rank leaves the fast path until the list that ends the current
  // join (a rank has joined: every collective goes through rank 0's table).
  std::vector<std::string> fast_demote;
  bool fast_pause = false;
  bool operator==(const ResponseList&) const = default;
};

std::vector<uint8_t> encode(const RequestList& list);
std::vector<uint8_t> encode(const ResponseList& list);
Status decode(const uint8_t* data, size_t size, RequestList* out);
Status decode(const uint8_t* data, size_t size, ResponseList* out);

}  // namespace kolo

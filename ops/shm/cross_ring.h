// ops/shm/cross_ring.h — CrossRing: allreduces of contiguous buffers between hosts over
// point-to-point MPI, several in flight at once, advanced by polling.
//
// The cross-host step of the sliced hierarchical allreduce (shm_hierarchical.h): local rank i
// of every host owns slice i of each chunk and allreduces it with local rank i of the other
// hosts on their own communicator, so every local rank carries its share of the traffic.
//
// Two steps (the name is from the first form, a ring of 2(P-1) steps): a reduce-scatter in
// which every host sends its partial of segment h straight to host h, and an allgather in
// which host h sends finished segment h to every other host. Per host that is 2(P-1)/P of
// the buffer, as a ring sends (the least an allreduce between P hosts sends), with both
// directions of each link busy at once, in two message rounds instead of 2(P-1).
//
// Why not MPI_Iallreduce: Open MPI 4.1's nonblocking allreduce (libnbc) uses its binomial
// algorithm — reduce to rank 0, then broadcast back — for fewer than 4 ranks or MPI_IN_PLACE.
// Between 2 hosts that sends the data one way and then the other way: each direction of the
// link is busy half of the time, which doubles the time on a link-bound step.
//
// Results depend only on the inputs: the host that owns a segment combines the P partials in
// host order (0, 1, ..., P-1) whichever host it is, scales the result once (`finish`) and
// sends it to the others, so every host ends with bitwise the same values, and the same
// values however the caller cut its buffer into segments (a ring adds in an order that starts
// at the segment's index, so the bits followed the cut). Messages of one allreduce use its
// own tag (start's `slot`, below kMaxSlots); MPI delivers them in order between two ranks, so
// its steps (and the messages of a step) match up.
//
// Ownership: borrows `comm` and each buffer until its allreduce is done (or the ring has
// failed: MPI cannot cancel a send or receive in flight, so the buffers must outlive the
// CrossRing's owner's use of them; ShmExecutor keeps them for its lifetime).
// Thread safety: one thread (kolo's coordinator), which alone uses `comm`.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "core/liveness.h"
#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo::shm {

class CrossRing {
 public:
  // `finish(seg, count)`: applied once to each segment when it is fully combined, before it
  // travels on (the postscale). May be empty.
  using Finish = std::function<void(void* seg, size_t count)>;

  CrossRing() = default;
  CrossRing(MPI_Comm comm, Liveness* liveness);
  CrossRing(const CrossRing&) = delete;
  CrossRing& operator=(const CrossRing&) = delete;

  // Starts the in-place allreduce of buf[0, count) among the ranks of `comm`; `slot` (0..)
  // names it: the same slot on every rank of comm, and not one in flight. Returns at once.
  Status start(int slot, void* buf, size_t count, DType dtype, ReduceOp op, Finish finish);
  // fp16/bf16 in 16 bits on the wire (half the bytes of float32). `acc` holds this host's
  // float32 partial of count values and is the scratch; the result, count values of `half`
  // (fp16 or bf16), lands in `out`. Every host's partial is rounded to 16 bits once — the
  // owner's own too, exactly as if it had travelled — and the owner adds the P rounded
  // partials in float32 in host order, multiplies by `factor` and rounds once more; the
  // allgather moves the rounded values. Element i of `out` is therefore
  //   round16(factor * (w(p_0[i]) + w(p_1[i]) + ... + w(p_{P-1}[i])))   (float32, left to right)
  // with w(x) = widen(round16(x)) and p_h host h's partial: the same bits on every host and
  // for every way of cutting the buffer.
  Status start_narrow(int slot, float* acc, void* out, size_t count, DType half, ReduceOp op, float factor);
  // Advances every allreduce in flight as far as it can without waiting.
  Status poll();
  // Polls until allreduce `slot` is done. Between polls it asks the liveness check whether a
  // peer died (and yields the CPU once the wait passes ~100 us).
  Status wait(int slot);
  // After a failure: forgets every allreduce in flight without touching it again (MPI may
  // still hold its buffers; their owner keeps them).
  void abandon() {
    for (Op& o : ops_) o.active = false;
  }
  bool busy(int slot) const { return slot < static_cast<int>(ops_.size()) && ops_[slot].active; }
  // Highest tag in use is kMaxSlots - 1.
  static constexpr int kMaxSlots = 1024;
  // A segment travels as messages of at most this many bytes, all posted at once.
  // Measured between 2 simulated hosts (50 Mbit/s each way, both ways at once): Open MPI's
  // TCP path moves one 25 MB message at 24 Mbit/s, 4 MB messages at 37-41, 1 MB at 44,
  // 256 KB at 47-48 (docs/benchmarks.md).
  static constexpr size_t kMessageBytes = size_t{256} << 10;

 private:
  struct Op {
    bool active = false;
    char* buf = nullptr;
    size_t count = 0;
    DType dtype = DType::kFloat32;
    ReduceOp op = ReduceOp::kSum;
    Finish finish;
    float* acc = nullptr;  // start_narrow: the float32 partial; buf is then the 16-bit result
    float factor = 1.0f;   // start_narrow: applied by the host that finishes a segment
    int step = 0;  // 0: reduce-scatter, 1: allgather, 2: done
    std::vector<MPI_Request> reqs;  // the current step's receives and sends
    char* incoming = nullptr;  // reduce-scatter: host h's partial of this host's segment at h * (largest segment)
    std::vector<float> widened;  // start_narrow: `incoming` widened to float32
  };
  Status begin(int slot, Op o);  // installs `o` in `slot` and posts its first step
  void combine(Op& o);           // after the reduce-scatter: this host's segment, in host order
  size_t seg_lo(const Op& o, int s) const;  // segment s is [seg_lo(s), seg_lo(s + 1))
  Status post(int slot);                     // sends and receives of the op's current step
  Status advance(int slot, bool* progressed);

  MPI_Comm comm_ = MPI_COMM_NULL;
  Liveness* liveness_ = nullptr;
  int rank_ = 0, size_ = 1;
  std::vector<Op> ops_;
  std::vector<std::vector<char>> incoming_;  // per slot, for Op::incoming (kept: MPI may hold it after a failure)
};

}  // namespace kolo::shm

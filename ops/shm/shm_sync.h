// ops/shm/shm_sync.h — the control block at the start of a shared segment, and PeerSync,
// the bounded step barrier that every shared-memory collective is built from.
//
// Protocol (why it is safe, in four lines). Every local rank counts "steps"; all ranks run
// the same steps in the same order. The data area has two halves; step e writes only into
// half e%2. A rank (1) announces step e with arrive(e) after writing its step-e data, (2)
// reads a peer's step-e data only after wait_for(peer, e) and finishes reading it before it
// arrives at e+1, and (3) before it writes step-e data or arrives at e, waits until every
// rank has arrived at e-1 (prepare(e)) — so nobody overwrites a half that a slower peer is
// still reading. Rule (3) also bounds how far any rank runs ahead: at most one step, which
// is why two descriptor slots per rank suffice. (allreduce_in_arena uses steps only as
// barriers: it reads and writes the ranks' arena regions, not the halves.)
//
// Every wait is bounded: spin briefly (collectives of a few KB finish in about a
// microsecond), then yield, then sleep on the peer's step word (a futex that the peer's
// arrive() wakes, so a long wait ends as soon as the peer arrives); every 10 ms it checks that the peer's process still
// exists; past `timeout` it fails. The first failure is published in the segment
// (abort word + message) so that every other rank stops within one poll instead of timing
// out on its own, and the group stays failed (the caller cannot resynchronise the steps).
//
// Ownership: PeerSync points into a mapping owned by ShmGroup and must not outlive it.
// Thread safety: one PeerSync per process, used only by the coordinator thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/liveness.h"

#include "kolo/status.h"

namespace kolo::shm {

// What a rank says it is doing at the first step of a collective; ranks must agree.
struct CallDesc {
  uint64_t what = 0;  // collective kind, dtype, reduce op, root (packed by the caller)
  uint64_t size = 0;  // element count, byte count, or a hash of per-rank sizes
  // Where an allreduce's buffers lie (a hash of each tensor's arena offset, or "private";
  // 0 where the caller does not check). Ranks must agree, but unlike a difference in `what`
  // or `size` (ranks calling different collectives: the group breaks), a difference here
  // fails only this call: every rank sees it at the call's first step, before any result
  // is written, and the steps stay in line.
  uint64_t placement = 0;
  bool same_call(const CallDesc& o) const { return what == o.what && size == o.size; }
};

inline constexpr uint64_t kSegmentMagic = 0x316d6873'6f6c6f6bULL;  // "kolo shm1" (LE)
inline constexpr uint32_t kSegmentVersion = 3;
inline constexpr size_t kLine = 128;  // two cache lines: keeps the adjacent-line prefetcher
                                      // from coupling neighbours' counters

struct alignas(kLine) ControlHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t local_size;
  uint64_t slot_bytes;
  uint64_t total_bytes;
  alignas(kLine) std::atomic<uint64_t> abort_word;  // 0 healthy; else (rank+1) | state<<32
  char abort_message[512];
};

struct alignas(kLine) RankLine {
  std::atomic<uint64_t> arrived;  // last step this rank has arrived at
  CallDesc desc[2];               // by step parity
  std::atomic<int32_t> pid;
  std::atomic<int32_t> left;      // 1 once this rank destroyed its group (it arrives no more)
  std::atomic<uint32_t> sleepers; // peers asleep on `arrived` (a futex): arrive() wakes them
};

// Bytes before the data area (header + one line per rank), rounded to a page.
size_t control_bytes(int local_size);

class PeerSync {
 public:
  PeerSync() = default;
  PeerSync(void* segment, int local_rank, int local_size, std::chrono::milliseconds timeout);

  // The next step number (1, 2, ...). Every rank must take the same steps.
  uint64_t next_step() { return ++step_; }
  // The last step handed out (0 before the first).
  uint64_t step() const { return step_; }

  // Rule 3: waits until every rank has arrived at e-1. Call before writing step-e data.
  Status prepare(uint64_t e) { return e - 1 <= all_seen_ ? Status::ok() : wait_all(e - 1); }
  // REQUIRES: this rank's step-e writes are done. Runs prepare(e), then publishes `desc`
  // and e.
  Status arrive(uint64_t e, const CallDesc& desc = {});
  // Waits until `peer` has arrived at step e.
  Status wait_for(int peer, uint64_t e);
  // Waits until every rank has arrived at e. When `check`, also compares every rank's step-e
  // descriptor with ours: a different call fails (and breaks the group) naming the first
  // rank that differs (see describe()); where the calls agree but some rank's `placement`
  // differs, *placement_differs is set (every rank sees the same) and the group stays whole.
  Status wait_all(uint64_t e, bool check = false, bool* placement_differs = nullptr);

  // Checks once, after every rank has published its pid, that this process can see its
  // peers' processes. Where it cannot (ranks in different pid namespaces that share
  // /dev/shm), dead peers are found by the timeout alone instead of being misreported.
  void check_peers_visible();

  // Says that this rank will arrive no more (its group is being destroyed): a peer still
  // waiting for it fails at its next liveness check instead of at its timeout.
  void leave() { lines_[rank_].left.store(1, std::memory_order_release); }

  // Publishes a failure for every rank of the group, and returns it (as `s`). `verbatim`:
  // the other ranks report s's message as it is (a dead peer, from the watch), instead of
  // "local rank R stopped the group: ...".
  Status fail(Status s, bool verbatim = false);
  // The failure some rank published, or ok.
  Status published_failure() const;
  // Whether `s` is the job's own verdict (the watch reports the same message: a dead peer),
  // which the group's other ranks must then report verbatim, as the later submissions of
  // every rank will. False without a watch.
  bool is_job_verdict(const Status& s) const;

  // Called at every liveness probe of a wait (every 10 ms) before this rank's own check of
  // the peer it waits for; an error breaks the group with it. kolo passes the runtime's
  // dead-peer check (core/liveness.h), so a rank on another host, or one this rank does not
  // wait for directly, that died stops the collective too. Null: none.
  void set_watch(std::function<Status()> watch) { watch_ = std::move(watch); }
  // Called on every round of a wait once the brief spin is over (every ~50 us at most): work
  // that must not stall while this rank waits for a local peer — the sliced allreduce's
  // transfers between hosts (shm_hierarchical.h). An error breaks the group with it. Cheap
  // when there is nothing to do. Null: none.
  void set_idle(std::function<Status()> idle) { idle_ = std::move(idle); }

  // How to print a descriptor in a mismatch message; set by ShmGroup.
  using Describer = std::string (*)(const CallDesc&);
  void set_describer(Describer d) { describe_ = d; }

  RankLine& line(int r) const { return lines_[r]; }
  ControlHeader& header() const { return *header_; }

 private:
  Status wait_slow(int peer, uint64_t e);
  Status peer_gone_or_late(int peer, uint64_t e, std::chrono::steady_clock::time_point start,
                           std::chrono::steady_clock::time_point now);

  ControlHeader* header_ = nullptr;
  RankLine* lines_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  std::chrono::milliseconds timeout_{0};
  int spin_ = 0;             // busy polls before yielding (small when ranks outnumber CPUs)
  bool liveness_ = true;     // peers' pids are meaningful here (check_peers_visible)
  uint64_t step_ = 0;        // last step handed out
  uint64_t all_seen_ = 0;    // every rank is known to have arrived at this step
  Describer describe_ = nullptr;
  std::function<Status()> watch_;
  std::function<Status()> idle_;
};

using kolo::process_alive;  // core/liveness.h

}  // namespace kolo::shm

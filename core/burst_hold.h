// core/burst_hold.h — rank 0's choice, each pass, between answering the tensors that are
// ready now and holding them a moment because more are about to complete.
//
// Why: rank 0 answers as soon as a name is complete on every rank, which gives a lone
// tensor its low latency. But when a step submits a burst of small tensors (1,000 × 4 KB),
// the peers' requests arrive in several messages, and answering after each one splits the
// burst into several response lists — each one a rendezvous of all ranks and a collective
// of its own. Holding while the burst is still arriving sends it as one fused list.
//
// Hold only when all of these hold: something is ready, some other names are still
// incomplete (submitted by some ranks, not all), the last request arrived less than
// `gap` ago (the burst is still coming), the ready bytes do not yet fill a fusion buffer,
// and the hold has lasted less than `max_hold`. A lone tensor (nothing incomplete) and a
// full fusion buffer are never held; no hold lasts longer than `max_hold`.
// Thread safety: pure function.
#pragma once

#include <chrono>
#include <cstddef>

namespace kolo {

struct BurstState {
  size_t ready = 0;         // names complete on every rank, not yet answered
  size_t ready_bytes = 0;   // their allreduce bytes
  size_t incomplete = 0;    // names submitted by some ranks but not all
  std::chrono::nanoseconds since_last_arrival{0};
  std::chrono::nanoseconds held_for{0};  // since this hold began (0 if not holding)
};

struct BurstHoldOptions {
  std::chrono::nanoseconds gap = std::chrono::microseconds(100);
  std::chrono::nanoseconds max_hold = std::chrono::microseconds(500);
  size_t fusion_threshold_bytes = 0;
};

inline bool hold_ready(const BurstState& s, const BurstHoldOptions& o) {
  return s.ready > 0 && s.incomplete > 0 && s.since_last_arrival < o.gap && s.held_for < o.max_hold &&
         s.ready_bytes < o.fusion_threshold_bytes;
}

}  // namespace kolo

// core/tuning.h — the autotuner as the coordinator drives it (KOLO_AUTOTUNE; the search
// itself: core/autotune.h). Rank 0 scores every response list and board round it runs
// (allreduced bytes per second), and carries new settings on its next list; every rank
// applies the settings a list carries after running it, so all ranks switch between the
// same two lists. The fusion threshold is kept here (rank 0 fuses by it); the cycle time
// and the CPU chunk size belong to the idle policy and the executors, which the caller
// sets from apply()'s answer.
//
// Ownership: owns the tuner and its CSV log. Thread safety: the coordinator's engine lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>

#include "core/autotune.h"
#include "core/config.h"
#include "core/message.h"

namespace kolo {

class Tuning {
 public:
  // Tunes on rank 0 with KOLO_AUTOTUNE=1; elsewhere only applies what lists carry.
  Tuning(const Config& config, int rank);

  // Bytes up to which rank 0 fuses (KOLO_FUSION_THRESHOLD until autotune changes it).
  size_t fusion_threshold() const { return fusion_threshold_; }
  bool tuning() const { return tuner_ != nullptr; }

  // Rank 0: one list or board round ran, having allreduced `bytes` (0: not scored).
  void record(uint64_t allreduced_bytes);
  void record(const ResponseList& list);
  // Rank 0: new settings wait for the next list; put_news carries them on `list`.
  bool has_news() const { return pending_.has_value(); }
  void put_news(ResponseList* list);
  // Every rank, after running `list`: takes the settings it carries (false: none).
  bool apply(const ResponseList& list);

 private:
  size_t fusion_threshold_;
  std::unique_ptr<Autotuner> tuner_;        // rank 0 with KOLO_AUTOTUNE=1
  std::optional<AutotuneParams> pending_;   // rank 0: to carry on the next list
  std::chrono::steady_clock::time_point last_record_;
  std::ofstream log_;                       // KOLO_AUTOTUNE_LOG
};

}  // namespace kolo

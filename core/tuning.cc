// The autotuner as the coordinator drives it: core/tuning.h.
#include "core/tuning.h"

#include <algorithm>

#include "core/fusion.h"
#include "core/logging.h"

namespace kolo {

using Clock = std::chrono::steady_clock;

Tuning::Tuning(const Config& config, int rank) : fusion_threshold_(config.fusion_threshold_bytes) {
  if (!config.autotune || rank != 0) return;
  AutotuneOptions o;
  o.initial = AutotuneParams::make(config.fusion_threshold_bytes, config.cycle_time_ms, config.cpu_chunk_bytes);
  o.max_samples = config.autotune_samples;
  o.records_per_sample = config.autotune_window;
  o.warmup_samples = std::min(o.warmup_samples, std::max(0, o.max_samples - 1));
  tuner_ = std::make_unique<Autotuner>(o);
  last_record_ = Clock::now();
  if (!config.autotune_log.empty()) {
    log_.open(config.autotune_log, std::ios::out | std::ios::trunc);
    if (log_) log_ << Autotuner::csv_header() << "\n" << std::flush;
    else KOLO_LOG(LogLevel::kWarning, "KOLO_AUTOTUNE_LOG=\"" << config.autotune_log << "\": cannot write");
  }
}

void Tuning::record(const ResponseList& list) {
  uint64_t bytes = 0;
  for (const Response& r : list.responses)
    if (r.type == Response::Type::kAllreduce) bytes += response_bytes(r);
  record(bytes);
}

void Tuning::record(uint64_t bytes) {
  if (!tuner_ || bytes == 0 || tuner_->done()) return;
  const auto now = Clock::now();
  tuner_->record(bytes, std::chrono::duration<double>(now - last_record_).count());
  last_record_ = now;
  if (auto p = tuner_->take_new_params()) pending_ = p;
  for (const auto& row : tuner_->take_new_rows())
    if (log_) log_ << row << "\n" << std::flush;
  if (tuner_->done() && !pending_)
    KOLO_LOG(LogLevel::kInfo, "autotune done: fusion threshold " << tuner_->current().fusion_threshold_bytes()
                                  << " B, cycle " << tuner_->current().cycle_time_ms() << " ms, chunk "
                                  << tuner_->current().cpu_chunk_bytes() << " B");
}

void Tuning::put_news(ResponseList* list) {
  if (!pending_) return;
  list->has_params = true;
  list->fusion_threshold_bytes = pending_->fusion_threshold_bytes();
  list->cycle_time_ms = pending_->cycle_time_ms();
  list->cpu_chunk_bytes = pending_->cpu_chunk_bytes();
  pending_.reset();
}

bool Tuning::apply(const ResponseList& list) {
  if (!list.has_params) return false;
  fusion_threshold_ = static_cast<size_t>(list.fusion_threshold_bytes);
  return true;
}

}  // namespace kolo

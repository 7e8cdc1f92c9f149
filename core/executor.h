// core/executor.h — the interface every backend implements to run one (possibly fused)
// collective that rank 0 has scheduled. The runtime keeps executors in an ordered list and
// gives each response to the first one that accepts it (e.g. shared memory before MPI).
//
// execute() is called on every rank with the same response, in the same order; it must
// either finish the collective on all ranks or return an error on this rank (the caller
// fails the handles). For allgather it fills each entry's handle->gathered.
// Thread safety: called only from the coordinator thread.
#pragma once

#include <vector>

#include "core/message.h"
#include "core/timeline.h"
#include "core/tensor_queue.h"
#include "kolo/status.h"

namespace kolo {

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

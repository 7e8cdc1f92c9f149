// core/timeline.h — a Chrome-trace timeline of what the runtime does with each tensor
// (KOLO_TIMELINE=path; open the file in Perfetto or chrome://tracing).
//
// Rank 0 writes it, because rank 0 sees negotiation from every rank: one track per tensor,
// with spans NEGOTIATE (first request seen → every rank submitted; an instant mark as each
// rank reports ready), QUEUE (decided → execution starts) and the executor's phases
// (MEMCPY_IN_FUSION_BUFFER, the collective, MEMCPY_OUT_FUSION_BUFFER). KOLO_TIMELINE_MARK_CYCLES=1
// adds a mark per coordinator cycle that did work.
//
// The file is a JSON array written one event per line and flushed often; the closing
// bracket is written at shutdown, and trace viewers accept the array without it, so a
// killed job still leaves a loadable trace. Events go through a bounded queue to a writer
// thread; when the queue is full, events are dropped and counted (never blocking the
// coordinator).
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kolo/status.h"

namespace kolo {

class Timeline {
 public:
  Timeline() = default;
  ~Timeline();
  // Opens `path` for writing and starts the writer thread. A timeline already open is
  // closed first (kolo.torch's start_timeline at run time); open() and close() are called
  // by one thread at a time (the runtime's), events from any thread meanwhile.
  Status open(const std::string& path, bool mark_cycles);
  bool enabled() const { return enabled_.load(std::memory_order_acquire); }
  bool mark_cycles() const { return mark_cycles_.load(std::memory_order_relaxed); }

  // A span on the tensor's track: begin() ... end(). Spans of one tensor nest or follow.
  void begin(const std::string& tensor, const std::string& phase);
  void end(const std::string& tensor);
  // An instant mark on the tensor's track, e.g. "rank 3 ready".
  void mark(const std::string& tensor, const std::string& what);
  void cycle_mark();
  // Writes the closing bracket and stops the writer. Further events are ignored.
  void close();
  uint64_t dropped() const;

 private:
  void event(const std::string& tensor, char phase, const std::string& name, bool instant_global = false);
  int64_t now_us() const;
  void writer_loop();

  static constexpr size_t kMaxQueued = 1 << 16;
  std::atomic<bool> enabled_{false};
  std::atomic<bool> mark_cycles_{false};
  std::atomic<int64_t> start_ns_{0};  // steady_clock at open(), in ns since its epoch
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;                     // guarded by mu_
  std::unordered_map<std::string, int> track_of_;     // guarded by mu_
  bool closing_ = false;                              // guarded by mu_
  uint64_t dropped_ = 0;                              // guarded by mu_
  std::ofstream out_;                                 // writer thread only
  std::thread writer_;
};

}  // namespace kolo

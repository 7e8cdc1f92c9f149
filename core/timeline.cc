// Chrome-trace timeline writer (see core/timeline.h).
#include "core/timeline.h"

#include <cstdio>

namespace kolo {
namespace {

// Minimal JSON string escaping for tensor names (quotes, backslashes, control bytes).
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

Timeline::~Timeline() { close(); }

Status Timeline::open(const std::string& path, bool mark_cycles) {
  close();
  out_.clear();
  out_.open(path, std::ios::out | std::ios::trunc);
  if (!out_) return Status::invalid_argument("timeline \"" + path + "\": cannot open the file for writing");
  out_ << "[\n";
  out_.flush();
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = false;
    queue_.clear();
    track_of_.clear();  // a new file names its tracks again
  }
  start_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  mark_cycles_.store(mark_cycles, std::memory_order_relaxed);
  enabled_.store(true, std::memory_order_release);
  writer_ = std::thread([this] { writer_loop(); });
  return Status::ok();
}

int64_t Timeline::now_us() const {
  const std::chrono::steady_clock::duration since_open(
      std::chrono::steady_clock::now().time_since_epoch().count() - start_ns_.load(std::memory_order_relaxed));
  return std::chrono::duration_cast<std::chrono::microseconds>(since_open).count();
}

void Timeline::event(const std::string& tensor, char phase, const std::string& name, bool instant_global) {
  if (!enabled()) return;
  const int64_t ts = now_us();
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) return;
  if (queue_.size() >= kMaxQueued) {
    ++dropped_;
    return;
  }
  int tid = 0;
  if (!instant_global) {
    auto [it, inserted] = track_of_.try_emplace(tensor, static_cast<int>(track_of_.size()) + 1);
    tid = it->second;
    if (inserted)  // name the track after the tensor
      queue_.push_back("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" + std::to_string(tid) +
                       ",\"args\":{\"name\":" + json_string(tensor) + "}}");
  }
  std::string e = "{\"ph\":\"" + std::string(1, phase) + "\",\"pid\":0,\"tid\":" + std::to_string(tid) +
                  ",\"ts\":" + std::to_string(ts);
  if (!name.empty()) e += ",\"name\":" + json_string(name);
  if (phase == 'i') e += ",\"s\":\"" + std::string(instant_global ? "g" : "t") + "\"";
  queue_.push_back(e + "}");
  cv_.notify_one();
}

void Timeline::begin(const std::string& tensor, const std::string& phase) { event(tensor, 'B', phase); }
void Timeline::end(const std::string& tensor) { event(tensor, 'E', ""); }
void Timeline::mark(const std::string& tensor, const std::string& what) { event(tensor, 'i', what); }
void Timeline::cycle_mark() {
  if (mark_cycles()) event("", 'i', "CYCLE", true);
}

uint64_t Timeline::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

void Timeline::writer_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return !queue_.empty() || closing_; });
    std::deque<std::string> batch;
    batch.swap(queue_);
    const bool stop = closing_;
    lock.unlock();
    for (const auto& e : batch) out_ << e << ",\n";
    out_.flush();  // a killed job keeps everything up to the last flush
    lock.lock();
    if (stop && queue_.empty()) break;
  }
}

void Timeline::close() {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return;
    closing_ = true;
  }
  cv_.notify_one();
  if (writer_.joinable()) writer_.join();
  // A final metadata event closes the array without a dangling comma.
  out_ << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"kolo rank 0\"}}\n]\n";
  out_.close();
  enabled_.store(false, std::memory_order_release);
}

}  // namespace kolo

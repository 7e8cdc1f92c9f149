// core/slot_table.h — per-name slots that are reused from one step to the next, so that the
// coordinator's steady state (the same tensor names every training step) allocates nothing.
//
// A training job submits the same names every step. Keying a node-based map by name and
// erasing the node when the collective completes costs a node, a key string and whatever the
// value owns (a Request's shape, a name, a per-rank vector) — allocated by one step, freed
// by the next. A SlotTable interns each name once: acquire(name) returns the slot that name
// used last time, with the value's buffers (vectors, strings) still allocated, so
// copy-assigning into it reuses their capacity. release() marks the slot idle but keeps the
// name's mapping.
//
// Bound: names that are never seen again (e.g. "barrier.17") must not accumulate. When more
// than `max_idle` idle names are kept, the next acquire() of a new name drops every idle
// name's mapping at once and recycles their slots (amortised O(1) per release).
//
// Slot indices are stable while a slot is in use; value references are stable until the
// next acquire() (the slot vector may grow).
// Ownership: owns the values. Thread safety: none; the owner serialises access.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kolo {

template <class T>
class SlotTable {
 public:
  explicit SlotTable(size_t max_idle = 4096) : max_idle_(max_idle) {}

  // The slot for `name`, marked in use; *fresh tells whether it was idle (or new) before.
  // A fresh slot's value holds whatever it held when last released (reset what matters).
  uint32_t acquire(const std::string& name, bool* fresh) {
    auto it = index_.find(name);
    if (it != index_.end()) {
      Slot& s = slots_[it->second];
      *fresh = !s.in_use;
      if (!s.in_use) {
        s.in_use = true;
        --idle_;
      }
      return it->second;
    }
    if (idle_ > max_idle_) sweep();
    uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
    } else {
      i = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    slots_[i].in_use = true;
    slots_[i].name = &index_.emplace(name, i).first->first;
    *fresh = true;
    return i;
  }

  // The in-use slot for `name`, or -1.
  int64_t find(const std::string& name) const {
    auto it = index_.find(name);
    return it != index_.end() && slots_[it->second].in_use ? static_cast<int64_t>(it->second) : -1;
  }

  // Marks slot `i` idle; its name keeps pointing at it until swept.
  void release(uint32_t i) {
    if (!slots_[i].in_use) return;
    slots_[i].in_use = false;
    ++idle_;
  }

  T& value(uint32_t i) { return slots_[i].value; }
  const T& value(uint32_t i) const { return slots_[i].value; }
  // REQUIRES: slot i is in use.
  const std::string& name(uint32_t i) const { return *slots_[i].name; }
  bool in_use(uint32_t i) const { return slots_[i].in_use; }

  // Calls fn(index) for every slot in use (unordered).
  template <class F>
  void for_each_in_use(F&& fn) const {
    for (uint32_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].in_use) fn(i);
  }

  size_t in_use_count() const { return index_.size() - idle_; }
  size_t idle_count() const { return idle_; }
  size_t capacity() const { return slots_.size(); }

 private:
  using Index = std::unordered_map<std::string, uint32_t>;
  struct Slot {
    T value{};
    bool in_use = false;
    const std::string* name = nullptr;  // the key in index_ (stable: map nodes never move)
  };

  // Forgets every idle name; their slots (and the buffers their values own) are reused.
  void sweep() {
    for (auto it = index_.begin(); it != index_.end();) {
      Slot& s = slots_[it->second];
      if (s.in_use) {
        ++it;
        continue;
      }
      free_.push_back(it->second);
      s.name = nullptr;
      it = index_.erase(it);
    }
    idle_ = 0;
  }

  size_t max_idle_;
  size_t idle_ = 0;
  Index index_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace kolo

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
// Lookup: an open-addressing index (linear probing, a power-of-two number of buckets, at
// most half full) of (hash, slot) pairs in one flat array; the name itself is kept in its
// slot and compared only when the hashes agree. A lookup is one hash of the name, a mask
// and, in the common case, one bucket and one name comparison: no division and no chain of
// separately allocated nodes (a burst of 1,000 small tensors looks up 1,000 names per step,
// with the caches just flushed by the step's data). Before that, acquire() tries a guess:
// jobs submit their names in the same order every step, so each slot remembers which slot
// was acquired right after it, and a name that matches that slot's skips hash and index.
//
// Bound: names that are never seen again (e.g. "barrier.17") must not accumulate. When more
// than `max_idle` idle names are kept, the next acquire() of a new name drops every idle
// name's mapping at once and recycles their slots (the index is rebuilt from the slots in
// use: amortised O(1) per release).
//
// Slot indices are stable while a slot is in use; value references are stable until the
// next acquire() (the slot vector may grow).
// Ownership: owns the values. Thread safety: none; the owner serialises access.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
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
    const uint32_t i = acquire_slot(name, fresh);
    // The order of acquisitions, for the next time round (see `next` in Slot).
    if (last_ < slots_.size()) slots_[last_].next = i;
    last_ = i;
    return i;
  }

  // The in-use slot for `name`, or -1.
  int64_t find(const std::string& name) const {
    const int64_t i = lookup(name, hash(name));
    return i >= 0 && slots_[static_cast<size_t>(i)].in_use ? i : -1;
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
  const std::string& name(uint32_t i) const { return slots_[i].name; }
  bool in_use(uint32_t i) const { return slots_[i].in_use; }

  // Calls fn(index) for every slot in use (unordered).
  template <class F>
  void for_each_in_use(F&& fn) const {
    for (uint32_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].in_use) fn(i);
  }

  size_t in_use_count() const { return mapped_ - idle_; }
  size_t idle_count() const { return idle_; }
  size_t capacity() const { return slots_.size(); }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Bucket {
    uint64_t hash = 0;
    uint32_t slot = kEmpty;
  };
  struct Slot {
    T value{};
    bool in_use = false;
    bool mapped = false;  // the index maps `name` to this slot
    uint64_t hash = 0;    // of `name`
    std::string name;
    // The slot acquired right after this one, last time (kEmpty: none yet). Only a guess: it
    // counts only while that slot is mapped to the very name asked for.
    uint32_t next = kEmpty;
  };

  static uint64_t hash(const std::string& name) { return std::hash<std::string_view>{}(name); }

  // acquire() without noting the order.
  uint32_t acquire_slot(const std::string& name, bool* fresh) {
    // A job submits its names in the same order every step: the slot that followed the last
    // one acquired last time is checked first, by name alone (no hash, no bucket).
    int64_t found = -1;
    if (last_ < slots_.size()) {
      const uint32_t p = slots_[last_].next;
      if (p < slots_.size() && slots_[p].mapped && slots_[p].name == name) found = p;
    }
    uint64_t h = 0;  // computed below whenever the guess fails, so a new name has it
    if (found < 0) found = lookup(name, h = hash(name));
    if (found >= 0) {
      Slot& s = slots_[static_cast<size_t>(found)];
      *fresh = !s.in_use;
      if (!s.in_use) {
        s.in_use = true;
        --idle_;
      }
      return static_cast<uint32_t>(found);
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
    Slot& s = slots_[i];
    s.in_use = true;
    s.mapped = true;
    s.name = name;  // a recycled slot's string keeps its capacity
    s.hash = h;
    ++mapped_;
    if (2 * mapped_ > buckets_.size()) rebuild(buckets_.empty() ? 16 : 2 * buckets_.size());
    else place(h, i);
    *fresh = true;
    return i;
  }

  // The slot `name` (hash h) is mapped to, in use or idle, or -1.
  int64_t lookup(const std::string& name, uint64_t h) const {
    if (buckets_.empty()) return -1;
    const size_t mask = buckets_.size() - 1;
    for (size_t b = h & mask;; b = (b + 1) & mask) {
      const Bucket& k = buckets_[b];
      if (k.slot == kEmpty) return -1;  // the index is never full: a probe always ends
      if (k.hash == h && slots_[k.slot].name == name) return k.slot;
    }
  }

  // Puts slot i (hash h) in the first empty bucket of its probe sequence.
  void place(uint64_t h, uint32_t i) {
    const size_t mask = buckets_.size() - 1;
    size_t b = h & mask;
    while (buckets_[b].slot != kEmpty) b = (b + 1) & mask;
    buckets_[b] = {h, i};
  }

  // Re-indexes every mapped slot into `buckets` empty buckets (a power of two).
  void rebuild(size_t buckets) {
    buckets_.assign(buckets, Bucket{});
    for (uint32_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].mapped) place(slots_[i].hash, i);
  }

  // Forgets every idle name; their slots (and the buffers their values own) are reused.
  void sweep() {
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      if (!s.mapped || s.in_use) continue;
      s.mapped = false;
      free_.push_back(i);
      --mapped_;
    }
    idle_ = 0;
    rebuild(buckets_.size());
  }

  size_t max_idle_;
  size_t idle_ = 0;
  size_t mapped_ = 0;            // names the index maps (in use or idle)
  uint32_t last_ = kEmpty;       // the slot acquire() returned last
  std::vector<Bucket> buckets_;  // empty, or a power of two with at most half in use
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace kolo

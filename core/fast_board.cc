// The fast path's agreement board (see core/fast_board.h).
#include "core/fast_board.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

namespace kolo {
namespace {

constexpr size_t kAlign = 128;  // two cache lines: neighbours' lines never share a prefetch pair

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// One record: lists started, words used, then the bit vector.
struct RecordHead {
  uint64_t lists;
  uint64_t words_used;
};

size_t record_bytes(size_t words) { return round_up(sizeof(RecordHead) + words * 8, 64); }

}  // namespace

struct FastBoard::Line {
  std::atomic<uint64_t> round;  // last round published (release: its record is written)
  std::atomic<uint32_t> left;   // 1 once this rank publishes no more
};

size_t FastBoard::bytes_needed(int size, size_t capacity) {
  const size_t words = (capacity + 63) / 64;
  return static_cast<size_t>(size) * round_up(kAlign + 2 * record_bytes(words), kAlign);
}

FastBoard::FastBoard(void* memory, int rank, int size, size_t capacity)
    : base_(static_cast<std::byte*>(memory)),
      rank_(rank),
      size_(size),
      words_((capacity + 63) / 64),
      line_bytes_(round_up(kAlign + 2 * record_bytes(words_), kAlign)) {
  static_assert(sizeof(Line) <= kAlign);
  static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);
}

FastBoard::Line* FastBoard::line(int r) const {
  // The memory is zeroed and laid out identically by every rank: the atomics are valid
  // objects in every process that maps it (lock-free atomics have no other state).
  return std::launder(reinterpret_cast<Line*>(base_ + static_cast<size_t>(r) * line_bytes_));
}

uint64_t* FastBoard::bits(int r, uint64_t round) const {
  std::byte* rec = base_ + static_cast<size_t>(r) * line_bytes_ + kAlign + (round % 2) * record_bytes(words_);
  return reinterpret_cast<uint64_t*>(rec + sizeof(RecordHead));
}

bool FastBoard::peer_ahead() const {
  for (int r = 0; r < size_; ++r)
    if (r != rank_ && line(r)->round.load(std::memory_order_acquire) > round_) return true;
  return false;
}

bool FastBoard::all_published() const {
  for (int r = 0; r < size_; ++r)
    if (line(r)->round.load(std::memory_order_acquire) < round_) return false;
  return true;
}

void FastBoard::publish(uint64_t lists, std::span<const uint32_t> ids) {
  const uint64_t next = round_ + 1;
  uint64_t* b = bits(rank_, next);
  auto* head = reinterpret_cast<RecordHead*>(reinterpret_cast<std::byte*>(b) - sizeof(RecordHead));
  // Clear only the words the previous record in this slot used, then set ours.
  std::memset(b, 0, std::min<size_t>(head->words_used, words_) * 8);
  size_t used = 0;
  for (uint32_t id : ids) {
    if (id / 64 >= words_) continue;
    b[id / 64] |= uint64_t{1} << (id % 64);
    used = std::max<size_t>(used, id / 64 + 1);
  }
  head->lists = lists;
  head->words_used = used;
  line(rank_)->round.store(next, std::memory_order_release);
  round_.store(next, std::memory_order_relaxed);
  open_.store(true, std::memory_order_relaxed);
}

bool FastBoard::try_resolve(bool* valid, std::vector<uint32_t>* agreed, int* late) {
  for (int r = 0; r < size_; ++r) {
    if (line(r)->round.load(std::memory_order_acquire) < round_) {
      *late = r;
      return false;
    }
  }
  // Every record of round_ is written and stays untouched until this rank publishes again.
  agreed->clear();
  auto head = [&](int r) {
    return reinterpret_cast<const RecordHead*>(reinterpret_cast<const std::byte*>(bits(r, round_)) -
                                               sizeof(RecordHead));
  };
  const uint64_t lists = head(0)->lists;
  size_t used = words_;
  *valid = true;
  for (int r = 0; r < size_; ++r) {
    *valid = *valid && head(r)->lists == lists;
    used = std::min<size_t>(used, head(r)->words_used);
  }
  if (*valid) {
    for (size_t w = 0; w < used; ++w) {
      uint64_t x = ~uint64_t{0};
      for (int r = 0; r < size_ && x; ++r) x &= bits(r, round_)[w];
      while (x) {
        const int bit = __builtin_ctzll(x);
        agreed->push_back(static_cast<uint32_t>(w * 64 + static_cast<size_t>(bit)));
        x &= x - 1;
      }
    }
  }
  open_.store(false, std::memory_order_relaxed);
  return true;
}

void FastBoard::leave() { line(rank_)->left.store(1, std::memory_order_release); }

bool FastBoard::peer_left(int* who) const {
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && line(r)->left.load(std::memory_order_acquire) != 0) {
      *who = r;
      return true;
    }
  }
  return false;
}

}  // namespace kolo

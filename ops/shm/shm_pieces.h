// ops/shm/shm_pieces.h — internal helpers of the shared-memory engine: a list of pieces
// seen as one buffer, and slicing a buffer among ranks.
// Thread safety: values; used by the coordinator thread.
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include "ops/shm/shm_group.h"

namespace kolo::shm::detail {

// The pieces of a multi-buffer collective seen as one buffer of `total` elements. Pieces
// that lie end to end in memory (a trainer's gradients in one flat buffer, fused into one
// response) are joined into one run, so that a step copies or reduces each run in one call
// instead of one per tensor.
class Pieces {
 public:
  Pieces(std::span<const Piece> pieces, size_t esize) : esize_(esize) {
    runs_.reserve(pieces.size());
    starts_.reserve(pieces.size() + 1);
    size_t at = 0;
    for (const Piece& p : pieces) {
      if (p.count == 0) continue;
      if (!runs_.empty() && static_cast<char*>(runs_.back().data) + runs_.back().count * esize == p.data) {
        runs_.back().count += p.count;
      } else {
        runs_.push_back(p);
        starts_.push_back(at);
      }
      at += p.count;
    }
    starts_.push_back(at);
  }
  size_t total() const { return starts_.back(); }

  // Calls fn(char* user, size_t done, size_t n) for each contiguous run of elements
  // [begin, begin + count): `user` points at element begin + done, n elements long.
  template <class F>
  void for_range(size_t begin, size_t count, F&& fn) const {
    if (count == 0) return;
    size_t i = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), begin) -
                                   starts_.begin()) - 1;
    size_t done = 0;
    while (done < count) {
      const size_t at = begin + done;
      const size_t in_run = at - starts_[i];
      const size_t n = std::min(count - done, runs_[i].count - in_run);
      fn(static_cast<char*>(runs_[i].data) + in_run * esize_, done, n);
      done += n;
      ++i;
    }
  }

 private:
  std::vector<Piece> runs_;     // the pieces with elements, adjacent ones joined
  size_t esize_;
  std::vector<size_t> starts_;  // element offset of each run, then the total
};

// Rank j's slice of a buffer of `m` elements among `n` ranks is [lo(j), lo(j+1)). Slices
// start on 64-byte boundaries so that no two ranks write one cache line.
struct Slicing {
  Slicing(size_t m, int n, size_t esize) : m_(m) {
    const size_t align = std::max<size_t>(1, 64 / esize);
    per_ = ((m + static_cast<size_t>(n) - 1) / static_cast<size_t>(n) + align - 1) / align * align;
  }
  size_t lo(int j) const { return std::min(m_, per_ * static_cast<size_t>(j)); }
  size_t len(int j) const { return lo(j + 1) - lo(j); }

 private:
  size_t m_;
  size_t per_;
};

// Rejects null pieces with elements and non-finite scales.
Status check_pieces(std::span<const Piece> pieces, double prescale, double postscale);

}  // namespace kolo::shm::detail

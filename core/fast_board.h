// core/fast_board.h — the board on which the ranks of one host agree, without rank 0 and
// without MPI, which already-negotiated tensors every rank has submitted (the fast path,
// docs/runtime.md "The fast path").
//
// The board is a small block of memory every local rank maps (ops/ creates it in shared
// memory; tests use plain memory and threads). Each rank owns one line: the last round it
// has published and two records (by round parity). A record says how many response lists
// from rank 0 this rank has started (`lists`) and which response-cache ids it has pending
// (a bit vector). Rounds are numbered 1, 2, ...; a rank publishes round r+1 only after it
// has read every rank's round-r record, so two records per rank suffice and no rank is ever
// more than one round ahead of another.
//
// A round is resolved by every rank from the same records, so every rank reaches the same
// verdict: *valid* when every rank has started the same number of lists (their response
// caches are then identical, so an id names the same tensor everywhere), and then the
// agreed set is the bitwise AND of all bit vectors. An invalid round agrees on nothing.
//
// Nothing here blocks: publish() and try_resolve() return at once; the coordinator polls.
// Ownership: borrows the memory (zeroed by its creator before any rank uses it), which
// must outlive the board. Thread safety: one FastBoard per rank, used by one thread (the
// coordinator); ranks synchronise through the memory with acquire/release atomics.
#pragma once

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

namespace kolo {

class FastBoard {
 public:
  // Bytes of board memory for `size` ranks and ids below `capacity`.
  static size_t bytes_needed(int size, size_t capacity);

  FastBoard(void* memory, int rank, int size, size_t capacity);

  // The last round this rank published, and whether it is still unresolved.
  uint64_t round() const { return round_.load(std::memory_order_relaxed); }
  bool open() const { return open_.load(std::memory_order_relaxed); }
  // REQUIRES: !open(). Some peer has published the next round: this rank must join it.
  bool peer_ahead() const;
  // Whether a pass has something to do on the board: the open round can be resolved, or
  // (none open) a peer has opened one. Cheap (one load per rank); for the idle loop.
  bool needs_attention() const { return open() ? all_published() : peer_ahead(); }
  // REQUIRES: !open(). Publishes this rank's record for round() + 1. `ids` are the pending
  // response-cache ids (each below capacity; larger ones are left out).
  void publish(uint64_t lists, std::span<const uint32_t> ids);
  // REQUIRES: open(). Once every rank has published round(): resolves it (open() becomes
  // false), sets *valid and fills *agreed with the agreed ids, ascending (empty unless
  // valid), and returns true. Otherwise returns false and *late is a rank not there yet.
  bool try_resolve(bool* valid, std::vector<uint32_t>* agreed, int* late);

  // This rank publishes no more rounds (its coordinator stopped). peer_left(): some peer
  // has said so (*who: which), so an open round will never resolve.
  void leave();
  bool peer_left(int* who) const;

 private:
  struct Line;
  Line* line(int r) const;
  bool all_published() const;  // every rank has published round()
  uint64_t* bits(int r, uint64_t round) const;

  std::byte* base_;
  int rank_, size_;
  size_t words_;        // 64-bit words per bit vector
  size_t line_bytes_;
  // Written by the pass that holds the coordinator's role; read lock-free by waiting
  // threads' needs_attention() as a hint (atomics: TSan found the plain fields racing).
  std::atomic<uint64_t> round_{0};
  std::atomic<bool> open_{false};
};

}  // namespace kolo

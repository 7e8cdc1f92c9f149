// ShmGroup::alltoallv and ShmGroup::reduce_scatter (ops/shm/shm_group.h).
//
// Both cut each rank's slot into local_size sub-slots, one per destination rank. Per step,
// rank r writes into sub-slot d the next piece of what rank d gets from it (alltoall: the
// block r sends to d; reduce-scatter: r's values of d's part, prescaled), and after every
// rank arrived, rank d reads sub-slot d of every slot (alltoall: copies the pieces out;
// reduce-scatter: reduces them, rank 0's values first, straight into its output). A rank's
// own block or part is read from its input directly, never through the slots. Larger
// alltoall blocks skip the slots: see alltoallv_direct.
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <string>

#include "core/logging.h"
#include "kernels/cpu_reduce.h"
#include "ops/shm/shm_group.h"
#include "ops/shm/shm_arena.h"
#include "ops/shm/shm_kernels.h"
#include "ops/shm/shm_result_pool.h"

namespace kolo::shm {
namespace {

// What a rank publishes in its slot at the first step of the direct path.
struct InputNote {
  int64_t pid;
  uint64_t address;     // of its input
  uint64_t out_offset;  // of its result in its region of `out_in`, or ShmResultPool::kNone
  uint64_t out_in;      // kInPool or kInArena
};
constexpr uint64_t kInPool = 0;
constexpr uint64_t kInArena = 1;

// What a rank publishes in its slot at the direct paths' last step.
struct DoneNote {
  uint8_t flag;          // 0: got every block; 1: a read failed; 2: cross-memory attach is off
  uint64_t next_offset;  // its next result block in its region of the pool, or ShmResultPool::kNone
  uint64_t next_room;    // that block's bytes
};

// Copies `bytes` at `remote` in process `pid` to `local`: one copy, made by the kernel.
// An empty string, or why it failed (the call and the errno text).
std::string read_peer(int64_t pid, char* local, uint64_t remote, size_t bytes) {
  while (bytes > 0) {
    iovec mine{local, bytes};
    iovec theirs{reinterpret_cast<void*>(remote), bytes};
    const ssize_t got = process_vm_readv(static_cast<pid_t>(pid), &mine, 1, &theirs, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      return "process_vm_readv from pid " + std::to_string(pid) + ": " +
             (got < 0 ? std::strerror(errno) : "read nothing");
    local += got;
    remote += static_cast<uint64_t>(got);
    bytes -= static_cast<size_t>(got);
  }
  return {};
}

// Rank r of n copies its block for every peer d (matrix m, its blocks at send_lo in `in`)
// to result_of(d) — d's result — after d's blocks from ranks < r; nullptr: not to d.
template <class F>
void push_blocks(int r, int n, const std::vector<size_t>& m, const char* in, const std::vector<size_t>& send_lo,
                 F result_of) {
  const auto N = static_cast<size_t>(n);
  for (int k = 1; k < n; ++k) {
    const int d = (r + k) % n;  // every rank starts with a different peer
    const size_t bytes = m[static_cast<size_t>(r) * N + static_cast<size_t>(d)];
    char* to = bytes == 0 ? nullptr : result_of(d);
    if (to == nullptr) continue;
    size_t into = 0;
    for (int s = 0; s < r; ++s) into += m[static_cast<size_t>(s) * N + static_cast<size_t>(d)];
    copy_bytes(to + into, in + send_lo[d], bytes);
  }
}

}  // namespace

// Step 1: every rank writes its pid, input address and result offset (in the pool or the
// arena, if its result lies there) into its slot and arrives. Then each rank copies its block for every
// peer whose result is pooled straight into it, and a rank whose result is not pooled reads
// its blocks from the peers' inputs with process_vm_readv (a peer's input stays valid: the
// peer waits at step 2). Step 2: every rank publishes whether it got all its blocks, and
// only then returns, so no input is released, and no result handed back, while a peer may
// still touch it. A rank that could not get its blocks makes every rank return *done =
// false (each sees the same flags; a failed read turns cross-memory attach off on every
// rank), and the caller runs the slot path over the same, untouched inputs.
Status ShmGroup::alltoallv_direct(const char* in, char* out, const std::vector<size_t>& m,
                                  const std::vector<size_t>& send_lo, const std::vector<size_t>& recv_lo,
                                  ShmResultPool* pool, const ShmArena* arena, const CallDesc& desc,
                                  bool* done) {
  const int n = opts_.local_size;
  const int r = opts_.local_rank;
  const auto N = static_cast<size_t>(n);
  const auto at = [&](int s, int d) { return m[static_cast<size_t>(s) * N + static_cast<size_t>(d)]; };
  *done = false;
  const uint64_t e = sync_.next_step();
  KOLO_RETURN_IF_ERROR(record(sync_.prepare(e)));
  size_t mine = pool != nullptr ? pool->offset_of(out, recv_lo[N]) : ShmResultPool::kNone;
  uint64_t mine_in = kInPool;
  if (mine == ShmResultPool::kNone && arena != nullptr) {
    const size_t where = arena->offset_of(out, recv_lo[N]);
    if (where != ShmArena::kNone) mine = where, mine_in = kInArena;
  }
  const InputNote note{static_cast<int64_t>(::getpid()), reinterpret_cast<uint64_t>(in), mine, mine_in};
  std::memcpy(slot(e, r), &note, sizeof note);
  KOLO_RETURN_IF_ERROR(record(sync_.arrive(e, desc)));
  KOLO_RETURN_IF_ERROR(record(sync_.wait_all(e, true)));
  // Push: this rank's block for d lands in d's shared result.
  push_blocks(r, n, m, in, send_lo, [&](int d) -> char* {
    InputNote peer;
    std::memcpy(&peer, slot(e, d), sizeof peer);
    if (peer.out_offset == ShmResultPool::kNone) return nullptr;
    return (peer.out_in == kInArena ? arena->region(d) : pool->region(d)) + peer.out_offset;
  });
  uint8_t flag = 0;  // 0: got every block; 1: a read failed; 2: cross-memory attach is off
  std::string failed;
  if (mine == ShmResultPool::kNone) {
    for (int k = 1; k < n && flag == 0; ++k) {
      const int s = (r + n - k) % n;
      const size_t bytes = at(s, r);
      if (bytes == 0) continue;
      if (!single_copy_ || opts_.single_copy_min_bytes == SIZE_MAX) {
        flag = 2;
        break;
      }
      InputNote peer;
      std::memcpy(&peer, slot(e, s), sizeof peer);
      size_t offset = 0;  // where rank s's block for this rank starts in its input
      for (int j = 0; j < r; ++j) offset += at(s, j);
      failed = read_peer(peer.pid, out + recv_lo[s], peer.address + offset, bytes);
      if (!failed.empty()) flag = 1;
    }
  }
  copy_bytes(out + recv_lo[r], in + send_lo[r], at(r, r));
  // A rank whose result is pooled offers its next result block, and so does one whose result
  // is private (a caller's output): its next call then takes one step and copies its blocks
  // out of the offered block (alltoallv_reserved) instead of a second step and a
  // process_vm_readv (up to reserve_max_bytes). One whose result lies in the arena offers
  // none (its peers write straight into it). Where this result is the reserved block it is
  // taken for good; otherwise the reserved block got nothing this call (the peers wrote at
  // `mine`).
  DoneNote done_note{flag, ShmResultPool::kNone, 0};
  if (pool != nullptr && (mine == ShmResultPool::kNone || mine_in == kInPool)) {
    bool taken = false;
    if (mine != ShmResultPool::kNone && pool->reserved(&taken) == mine && taken) pool->consume_reserved();
    reserve_next(pool, recv_lo[N], &done_note.next_offset, &done_note.next_room);
  }
  const uint64_t e2 = sync_.next_step();
  KOLO_RETURN_IF_ERROR(record(sync_.prepare(e2)));
  std::memcpy(slot(e2, r), &done_note, sizeof done_note);
  KOLO_RETURN_IF_ERROR(record(sync_.arrive(e2, desc)));
  KOLO_RETURN_IF_ERROR(record(sync_.wait_all(e2)));
  bool all_got = true, read_failed = false;
  for (int s = 0; s < n; ++s) {
    DoneNote theirs;
    std::memcpy(&theirs, slot(e2, s), sizeof theirs);
    all_got = all_got && theirs.flag == 0;
    read_failed = read_failed || theirs.flag == 1;
  }
  if (all_got && pool != nullptr) read_reserved(e2);
  if (read_failed) {
    single_copy_ = false;
    if (!failed.empty())
      KOLO_LOG(LogLevel::kWarning, "shared memory: alltoall stops using cross-memory attach (" << failed << ")");
  }
  *done = all_got;
  return Status::ok();
}

void ShmGroup::reserve_next(ShmResultPool* pool, size_t bytes, uint64_t* offset, uint64_t* room) {
  *offset = ShmResultPool::kNone;
  *room = 0;
  if (bytes > opts_.reserve_max_bytes) return;
  size_t held = 0;
  const size_t at = pool->reserve(bytes, &held);
  if (at == ShmResultPool::kNone) return;
  *offset = at;
  *room = held;
}

void ShmGroup::read_reserved(uint64_t e) {
  const auto N = static_cast<size_t>(opts_.local_size);
  next_offset_.resize(N);
  next_room_.resize(N);
  for (size_t s = 0; s < N; ++s) {
    DoneNote theirs;
    std::memcpy(&theirs, slot(e, static_cast<int>(s)), sizeof theirs);
    next_offset_[s] = theirs.next_offset;
    next_room_[s] = theirs.next_room;
  }
  reserved_at_ = e;
}

// Every rank decides alike: the same matrix, the same published blocks, the same step.
bool ShmGroup::reserved_fits(const std::vector<size_t>& m) const {
  if (reserved_at_ == 0 || reserved_at_ != sync_.step()) return false;  // a group step came in between
  const auto N = static_cast<size_t>(opts_.local_size);
  for (size_t d = 0; d < N; ++d) {
    size_t total = 0, from_peers = 0;
    for (size_t s = 0; s < N; ++s) {
      total += m[s * N + d];
      if (s != d) from_peers += m[s * N + d];
    }
    if (from_peers > 0 && (next_offset_[d] == ShmResultPool::kNone || next_room_[d] < total)) return false;
  }
  return true;
}

// The direct path in one step. At the previous call's last step every rank published its
// next result block, reserved in the pool (take() hands it out first, and it is never free
// while reserved), and no group step came in between: so every sender copies its block for
// d straight into d's reserved block — whether or not d has reached this call yet — and
// one step tells every rank its blocks arrived (and keeps every input valid until then).
// A rank whose result is the reserved block is then done; one whose result lies elsewhere
// copies its blocks out of the reserved block after the step. Where that result is private
// (a caller's output kept across calls, the heap), it takes the reserved block as an
// ordinary one before the step and reserves and offers another, so the next call is one
// step again while it still copies out of this one (given back after the copy: a block is
// never offered while its owner may still read it): one step and one extra copy. A result
// elsewhere in the pool or in the arena offers none (np=4 A/B: staging those too made the
// kolo-result case slower, 0.6-0.75x MPI -> 0.6-1.1x), and the next call takes two steps.
Status ShmGroup::alltoallv_reserved(const char* in, char* out, const std::vector<size_t>& m,
                                    const std::vector<size_t>& send_lo, const std::vector<size_t>& recv_lo,
                                    ShmResultPool* pool, const ShmArena* arena, const CallDesc& desc) {
  const int r = opts_.local_rank;
  const int n = opts_.local_size;
  const auto N = static_cast<size_t>(n);
  const uint64_t e = sync_.next_step();
  KOLO_RETURN_IF_ERROR(record(sync_.prepare(e)));
  push_blocks(r, n, m, in, send_lo,
              [&](int d) { return pool->region(d) + next_offset_[static_cast<size_t>(d)]; });
  const auto at = [&](int s, int d) { return m[static_cast<size_t>(s) * N + static_cast<size_t>(d)]; };
  copy_bytes(out + recv_lo[r], in + send_lo[r], at(r, r));
  bool pushed = false;  // whether peers write into this rank's reserved block
  for (int s = 0; s < n; ++s) pushed = pushed || (s != r && at(s, r) > 0);
  const uint64_t mine = next_offset_[static_cast<size_t>(r)];
  const size_t out_in_pool = pool->offset_of(out, recv_lo[N]);
  const bool in_place = mine != ShmResultPool::kNone && out_in_pool == mine;
  const bool in_private = out_in_pool == ShmResultPool::kNone &&
                          (arena == nullptr || arena->offset_of(out, recv_lo[N]) == ShmArena::kNone);
  DoneNote note{0, ShmResultPool::kNone, 0};
  void* staged = nullptr;  // the reserved block, taken: a private result is copied out of it
  bool offer = in_place;
  if (in_place) {
    pool->consume_reserved();
  } else if (in_private && mine != ShmResultPool::kNone) {
    offer = !pushed;  // nothing written into the reserved block: it can be offered again
    if (pushed) staged = pool->take(recv_lo[N]);  // hands out the reserved block first
    if (staged != nullptr && pool->offset_of(staged, recv_lo[N]) == mine) {
      pool->consume_reserved();
      offer = true;
    } else if (staged != nullptr) {
      pool->give(staged);
      staged = nullptr;
    }
  }
  if (offer) reserve_next(pool, recv_lo[N], &note.next_offset, &note.next_room);
  std::memcpy(slot(e, r), &note, sizeof note);
  KOLO_RETURN_IF_ERROR(record(sync_.arrive(e, desc)));
  // On a failed step `staged` is kept out for good: a peer slow rather than gone may still
  // write into it.
  KOLO_RETURN_IF_ERROR(record(sync_.wait_all(e, true)));
  if (pushed && !in_place) {
    const char* held = pool->region(r) + mine;
    for (int s = 0; s < n; ++s)
      if (s != r) copy_bytes(out + recv_lo[s], held + recv_lo[s], at(s, r));
  }
  if (staged != nullptr) pool->give(staged);  // not before the step: peers write into it until then
  read_reserved(e);
  return Status::ok();
}

Status ShmGroup::alltoallv(const void* in, void* out, const std::vector<size_t>& m, ShmResultPool* pool,
                           const ShmArena* arena) {
  KOLO_RETURN_IF_ERROR(usable());
  const int n = opts_.local_size;
  const int r = opts_.local_rank;
  const auto N = static_cast<size_t>(n);
  if (m.size() != N * N) {
    return Status::invalid_argument("shared memory: alltoallv got " + std::to_string(m.size()) +
                                    " sizes for " + std::to_string(n) + " local ranks (expected " +
                                    std::to_string(N * N) + ")");
  }
  std::vector<size_t> sd(N + 1, 0), rd(N + 1, 0);
  for (size_t j = 0; j < N; ++j) {
    sd[j + 1] = sd[j] + m[static_cast<size_t>(r) * N + j];
    rd[j + 1] = rd[j] + m[j * N + static_cast<size_t>(r)];
  }
  if ((in == nullptr && sd[N] > 0) || (out == nullptr && rd[N] > 0))
    return Status::invalid_argument("shared memory: alltoallv of a null buffer");
  const auto* i = static_cast<const char*>(in);
  auto* o = static_cast<char*>(out);
  size_t most = 0;
  for (size_t s = 0; s < N; ++s)
    for (size_t d = 0; d < N; ++d)
      if (s != d) most = std::max(most, m[s * N + d]);
  const CallDesc desc = detail::describe_alltoallv(m);
  // The same choice on every rank: the pool and the arena are each on all or none,
  // single_copy_ changes on all.
  if (n > 1 && pool != nullptr && most >= opts_.pool_direct_min_bytes && reserved_fits(m))
    return alltoallv_reserved(i, o, m, sd, rd, pool, arena, desc);
  if (n > 1 && ((pool != nullptr && most >= opts_.pool_direct_min_bytes) ||
                (single_copy_ && most >= opts_.single_copy_min_bytes))) {
    bool done = false;
    KOLO_RETURN_IF_ERROR(alltoallv_direct(i, o, m, sd, rd, pool, arena, desc, &done));
    if (done) return Status::ok();
  }
  copy_bytes(o + rd[r], i + sd[r], m[static_cast<size_t>(r) * N + static_cast<size_t>(r)]);
  if (n == 1) return Status::ok();
  const size_t sub = slot_bytes_ / N / 64 * 64;
  const size_t rounds = std::max<size_t>(1, (most + sub - 1) / sub);
  for (size_t k = 0; k < rounds; ++k) {
    const uint64_t e = sync_.next_step();
    const size_t from = k * sub;
    KOLO_RETURN_IF_ERROR(record(sync_.prepare(e)));
    char* mine = slot(e, r);
    for (int d = 0; d < n; ++d) {
      const size_t bytes = m[static_cast<size_t>(r) * N + static_cast<size_t>(d)];
      if (d == r || bytes <= from) continue;
      copy_bytes(mine + static_cast<size_t>(d) * sub, i + sd[d] + from, std::min(sub, bytes - from));
    }
    KOLO_RETURN_IF_ERROR(record(sync_.arrive(e, desc)));
    KOLO_RETURN_IF_ERROR(record(sync_.wait_all(e, k == 0)));
    for (int s = 0; s < n; ++s) {
      const size_t bytes = m[static_cast<size_t>(s) * N + static_cast<size_t>(r)];
      if (s == r || bytes <= from) continue;
      copy_bytes(o + rd[s] + from, slot(e, s) + static_cast<size_t>(r) * sub, std::min(sub, bytes - from));
    }
  }
  return Status::ok();
}

Status ShmGroup::reduce_scatter(const void* in, void* out, const std::vector<size_t>& lo, DType dtype,
                                ReduceOp op, double prescale, double postscale) {
  KOLO_RETURN_IF_ERROR(usable());
  const int n = opts_.local_size;
  const int r = opts_.local_rank;
  const auto N = static_cast<size_t>(n);
  if (lo.size() != N + 1 || lo[0] != 0 || !std::is_sorted(lo.begin(), lo.end())) {
    return Status::invalid_argument("shared memory: reduce_scatter needs " + std::to_string(n + 1) +
                                    " ascending part bounds from 0");
  }
  if (!std::isfinite(prescale) || !std::isfinite(postscale))
    return Status::invalid_argument("shared memory: reduce_scatter scale factors must be finite");
  const size_t esize = dtype_size(dtype);
  const size_t count = lo[N];
  const size_t my_n = lo[r + 1] - lo[r];
  if ((in == nullptr && count > 0) || (out == nullptr && my_n > 0))
    return Status::invalid_argument("shared memory: reduce_scatter of a null buffer");
  const auto* i = static_cast<const char*>(in);
  auto* o = static_cast<char*>(out);
  if (n == 1) {  // the scales alone (one rounding for fp16/bf16)
    const void* src = i;
    reduce_sources(o, &src, 1, count, dtype, op, nullptr, PostScale{true, 1, postscale}, prescale);
    return Status::ok();
  }
  const size_t sub_bytes = slot_bytes_ / N / 64 * 64;
  const size_t sub = sub_bytes / esize;
  size_t most = 0;
  for (size_t d = 0; d < N; ++d) most = std::max(most, lo[d + 1] - lo[d]);
  const size_t rounds = std::max<size_t>(1, (most + sub - 1) / sub);
  const CallDesc desc = detail::describe_reduce_scatter(dtype, op, lo);
  const PostScale post{true, n, postscale};
  for (size_t k = 0; k < rounds; ++k) {
    const uint64_t e = sync_.next_step();
    const size_t from = k * sub;
    KOLO_RETURN_IF_ERROR(record(sync_.prepare(e)));
    char* mine = slot(e, r);
    for (int d = 0; d < n; ++d) {
      const size_t len = lo[d + 1] - lo[d];
      if (d == r || len <= from) continue;  // values travel unscaled: the kernel applies the prescale
      copy_bytes(mine + static_cast<size_t>(d) * sub_bytes, i + (lo[d] + from) * esize,
                 std::min(sub, len - from) * esize);
    }
    KOLO_RETURN_IF_ERROR(record(sync_.arrive(e, desc)));
    KOLO_RETURN_IF_ERROR(record(sync_.wait_all(e, k == 0)));
    if (my_n <= from) continue;
    for (int j = 0; j < n; ++j) srcs_[j] = slot(e, j) + static_cast<size_t>(r) * sub_bytes;
    srcs_[r] = i + (lo[r] + from) * esize;
    reduce_sources(o + from * esize, srcs_.data(), n, std::min(sub, my_n - from), dtype, op, nullptr, post,
                   prescale);
  }
  return Status::ok();
}

}  // namespace kolo::shm

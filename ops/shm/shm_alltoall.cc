// ShmGroup::alltoallv and ShmGroup::reduce_scatter (ops/shm/shm_group.h).
//
// Both cut each rank's slot into local_size sub-slots, one per destination rank. Per step,
// rank r writes into sub-slot d the next piece of what rank d gets from it (alltoall: the
// block r sends to d; reduce-scatter: r's values of d's part, prescaled), and after every
// rank arrived, rank d reads sub-slot d of every slot (alltoall: copies the pieces out;
// reduce-scatter: reduces them, rank 0's values first, straight into its output). A rank's
// own block or part is read from its input directly, never through the slots. Large
// alltoall blocks skip the slots: see alltoallv_single_copy.
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>

#include "core/logging.h"
#include "ops/cpu_reduce.h"
#include "ops/shm/shm_group.h"
#include "ops/shm/shm_kernels.h"

namespace kolo::shm {
namespace {

// What a rank publishes in its slot at the first step of a single-copy alltoall.
struct InputNote {
  int64_t pid;
  uint64_t address;  // of its input
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

}  // namespace

// Step 1: every rank writes its pid and input address into its slot and arrives; then each
// reads its block from every peer's input (a peer's input stays valid: the peer waits at
// step 2). Step 2: every rank publishes whether all its reads succeeded, and only then
// returns, so no input is released while a peer may still read it. A failed read on any
// rank turns the path off on every rank (each sees the same flags), and the caller runs
// the slot path instead over the same, untouched inputs.
Status ShmGroup::alltoallv_single_copy(const char* in, char* out, const std::vector<size_t>& m,
                                       const std::vector<size_t>& send_lo, const std::vector<size_t>& recv_lo,
                                       const CallDesc& desc, bool* done) {
  const int n = opts_.local_size;
  const int r = opts_.local_rank;
  const auto N = static_cast<size_t>(n);
  *done = false;
  const uint64_t e = sync_.next_step();
  KOLO_RETURN_IF_ERROR(record(sync_.prepare(e)));
  const InputNote note{static_cast<int64_t>(::getpid()), reinterpret_cast<uint64_t>(in)};
  std::memcpy(slot(e, r), &note, sizeof note);
  KOLO_RETURN_IF_ERROR(record(sync_.arrive(e, desc)));
  KOLO_RETURN_IF_ERROR(record(sync_.wait_all(e, true)));
  std::string failed;
  for (int s = 0; s < n && failed.empty(); ++s) {
    const size_t bytes = m[static_cast<size_t>(s) * N + static_cast<size_t>(r)];
    if (s == r || bytes == 0) continue;
    InputNote peer;
    std::memcpy(&peer, slot(e, s), sizeof peer);
    size_t offset = 0;  // where rank s's block for this rank starts in its input
    for (int j = 0; j < r; ++j) offset += m[static_cast<size_t>(s) * N + static_cast<size_t>(j)];
    failed = read_peer(peer.pid, out + recv_lo[s], peer.address + offset, bytes);
  }
  copy_bytes(out + recv_lo[r], in + send_lo[r], m[static_cast<size_t>(r) * N + static_cast<size_t>(r)]);
  const uint64_t e2 = sync_.next_step();
  KOLO_RETURN_IF_ERROR(record(sync_.prepare(e2)));
  *reinterpret_cast<volatile uint8_t*>(slot(e2, r)) = failed.empty() ? 0 : 1;
  KOLO_RETURN_IF_ERROR(record(sync_.arrive(e2, desc)));
  KOLO_RETURN_IF_ERROR(record(sync_.wait_all(e2)));
  bool all_read = true;
  for (int s = 0; s < n; ++s) all_read = all_read && *reinterpret_cast<volatile uint8_t*>(slot(e2, s)) == 0;
  if (!all_read) {
    single_copy_ = false;
    if (!failed.empty())
      KOLO_LOG(LogLevel::kWarning, "shared memory: alltoall copies through the segment from now on (" << failed << ")");
    return Status::ok();
  }
  *done = true;
  return Status::ok();
}

Status ShmGroup::alltoallv(const void* in, void* out, const std::vector<size_t>& m) {
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
  if (n > 1 && single_copy_ && most >= opts_.single_copy_min_bytes) {  // the same choice on every rank
    bool done = false;
    KOLO_RETURN_IF_ERROR(alltoallv_single_copy(i, o, m, sd, rd, desc, &done));
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

// ShmGroup set-up, broadcast and allgatherv (ops/shm/shm_group.h); allreduce is in
// shm_allreduce.cc.
#include "ops/shm/shm_group.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "ops/shm/shm_kernels.h"

namespace kolo::shm {
namespace {

enum class Kind : uint8_t {
  kAllreduce = 1,
  kBroadcast = 2,
  kAllgatherv = 3,
  kReduceToLeader = 4,
  kAlltoallv = 6,
  kReduceScatter = 7,
  kSlicedAllreduce = 9,  // reduce_slice's first step (shm_sliced.cc)
};

uint64_t pack(Kind k, uint32_t root) { return static_cast<uint64_t>(k) | (uint64_t{root} << 32); }

// FNV-1a over the per-rank sizes: ranks that disagree on them must not start copying.
uint64_t hash_sizes(const std::vector<size_t>& v) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t x : v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (x >> (8 * b)) & 0xffu;
      h *= 1099511628211ULL;
    }
  }
  return h;
}

std::string describe(const CallDesc& d) {
  const auto kind = static_cast<Kind>(d.what & 0xff);
  const uint32_t root = static_cast<uint32_t>(d.what >> 32);
  switch (kind) {
    case Kind::kBroadcast:
      return "broadcast of " + std::to_string(d.size) + " bytes from local rank " +
             std::to_string(root);
    case Kind::kAllgatherv:
      return "allgatherv (per-rank sizes hash " + std::to_string(d.size) + ")";
    case Kind::kAlltoallv:
      return "alltoallv (size matrix hash " + std::to_string(d.size) + ")";
    case Kind::kReduceScatter:
      return "reduce_scatter of " + std::string(dtype_name(static_cast<DType>((d.what >> 8) & 0xff))) + " (" +
             std::string(reduce_op_name(static_cast<ReduceOp>((d.what >> 16) & 0xff))) + "), parts hash " +
             std::to_string(d.size);
    case Kind::kSlicedAllreduce:
      return "sliced allreduce across hosts of " + std::to_string(d.size) + " x " +
             std::string(dtype_name(static_cast<DType>((d.what >> 8) & 0xff))) + " (" +
             std::string(reduce_op_name(static_cast<ReduceOp>((d.what >> 16) & 0xff))) + ")";
    case Kind::kAllreduce:
    case Kind::kReduceToLeader: {
      const auto dtype = static_cast<DType>((d.what >> 8) & 0xff);
      const auto op = static_cast<ReduceOp>((d.what >> 16) & 0xff);
      const std::string types = std::string(dtype_name(dtype)) + " (" + std::string(reduce_op_name(op)) + ")";
      return std::string(kind == Kind::kAllreduce ? "allreduce" : "reduce_to_leader") + " of " +
             std::to_string(d.size) + " x " + types;
    }
  }
  return "an unknown collective";
}

}  // namespace

CallDesc detail::describe_reduce(bool to_leader, DType dtype, ReduceOp op, size_t count, uint64_t placement) {
  const Kind k = to_leader ? Kind::kReduceToLeader : Kind::kAllreduce;
  return {pack(k, 0) | (uint64_t{static_cast<uint8_t>(dtype)} << 8) |
              (uint64_t{static_cast<uint8_t>(op)} << 16),
          count, placement};
}

Status ShmGroup::agree_first(uint64_t e) {
  bool differs = false;
  KOLO_RETURN_IF_ERROR(record(sync_.wait_all(e, true, &differs)));
  if (differs) return Status::mismatch(kPlacementMismatch);
  return Status::ok();
}

CallDesc detail::describe_sliced(DType dtype, ReduceOp op, size_t total) {
  return {pack(Kind::kSlicedAllreduce, 0) | (uint64_t{static_cast<uint8_t>(dtype)} << 8) |
              (uint64_t{static_cast<uint8_t>(op)} << 16),
          total};
}

CallDesc detail::describe_alltoallv(const std::vector<size_t>& matrix) {
  return {pack(Kind::kAlltoallv, 0), hash_sizes(matrix)};
}

CallDesc detail::describe_reduce_scatter(DType dtype, ReduceOp op, const std::vector<size_t>& parts) {
  return {pack(Kind::kReduceScatter, 0) | (uint64_t{static_cast<uint8_t>(dtype)} << 8) |
              (uint64_t{static_cast<uint8_t>(op)} << 16),
          hash_sizes(parts)};
}

ShmGroup::ShmGroup(const Options& options) : opts_(options) {}

ShmGroup::~ShmGroup() {
  if (data_ != nullptr) sync_.leave();
}

Status ShmGroup::create(const Options& o, const Agree& agree, std::unique_ptr<ShmGroup>* out) {
  if (o.local_size < 1 || o.local_rank < 0 || o.local_rank >= o.local_size) {
    return Status::invalid_argument("shared memory: local rank " + std::to_string(o.local_rank) +
                                    " of " + std::to_string(o.local_size) + " is out of range");
  }
  const size_t min_bytes = 2 * static_cast<size_t>(o.local_size) * 4096;
  if (o.segment_bytes < min_bytes) {
    return Status::invalid_argument("shared memory: segment_bytes " +
                                    std::to_string(o.segment_bytes) + " is below the minimum " +
                                    std::to_string(min_bytes) + " for " +
                                    std::to_string(o.local_size) + " local ranks");
  }
  KOLO_RETURN_IF_ERROR(SharedMapping::validate_name(o.name));
  std::unique_ptr<ShmGroup> g(new ShmGroup(o));
  g->slot_bytes_ = o.segment_bytes / (2 * static_cast<size_t>(o.local_size)) / 4096 * 4096;
  if (o.small_bytes > g->slot_bytes_) g->opts_.small_bytes = g->slot_bytes_;
  g->srcs_.resize(static_cast<size_t>(o.local_size));
  if (o.local_size > 1) KOLO_RETURN_IF_ERROR(g->attach(agree));
  *out = std::move(g);
  return Status::ok();
}

// Creates or maps the segment (SharedMapping::establish) and checks its header.
Status ShmGroup::attach(const Agree& agree) {
  const int n = opts_.local_size;
  const size_t total = control_bytes(n) + 2 * static_cast<size_t>(n) * slot_bytes_;
  const auto init = [&](void* base) {
    auto* h = static_cast<ControlHeader*>(base);
    h->version = kSegmentVersion;
    h->local_size = static_cast<uint32_t>(n);
    h->slot_bytes = slot_bytes_;
    h->total_bytes = total;
    h->magic = kSegmentMagic;
  };
  const auto on_mapped = [&](void* base) -> Status {
    const auto* h = static_cast<const ControlHeader*>(base);
    if (h->magic != kSegmentMagic || h->version != kSegmentVersion ||
        h->local_size != static_cast<uint32_t>(n) || h->slot_bytes != slot_bytes_) {
      return Status::communication("shared memory: segment \"" + opts_.name +
                                   "\" was made by a different kolo version or with other options");
    }
    sync_ = PeerSync(base, opts_.local_rank, n, opts_.peer_timeout);
    sync_.set_describer(&describe);
    // Before the second agreement: a peer's liveness check must never see pid 0.
    sync_.line(opts_.local_rank).pid.store(static_cast<int32_t>(getpid()));
    data_ = static_cast<char*>(base) + control_bytes(n);
    return Status::ok();
  };
  KOLO_RETURN_IF_ERROR(SharedMapping::establish(opts_.name, total, opts_.local_rank == 0, agree,
                                                init, on_mapped, &mapping_));
  sync_.check_peers_visible();  // every pid was published before the second agreement
  return Status::ok();
}

char* ShmGroup::slot(uint64_t step, int rank) const {
  const size_t half = step % 2;
  return data_ + (half * static_cast<size_t>(opts_.local_size) + static_cast<size_t>(rank)) *
                     slot_bytes_;
}

Status ShmGroup::usable() {
  if (!broken_.is_ok()) return broken_;
  if (opts_.local_size > 1) {
    Status s = sync_.published_failure();
    if (!s.is_ok()) broken_ = s;
  }
  return broken_;
}

Status ShmGroup::record(Status s) {
  // A dead peer found outside the group's own waits (e.g. by the transfers between hosts)
  // goes to the local peers word for word, so that their pending and later errors agree.
  if (!s.is_ok() && broken_.is_ok()) broken_ = opts_.local_size > 1 ? sync_.fail(s, sync_.is_job_verdict(s)) : s;
  return s;
}

Status ShmGroup::broadcast(void* buf, size_t bytes, int root) {
  KOLO_RETURN_IF_ERROR(usable());
  const int n = opts_.local_size;
  if (root < 0 || root >= n) {
    return Status::invalid_argument("shared memory: broadcast root " + std::to_string(root) +
                                    " is not a local rank (local size " + std::to_string(n) + ")");
  }
  if (buf == nullptr && bytes > 0) return Status::invalid_argument("shared memory: broadcast of a null buffer");
  if (n == 1) return Status::ok();
  const CallDesc d{pack(Kind::kBroadcast, static_cast<uint32_t>(root)), bytes};
  const bool is_root = opts_.local_rank == root;
  const size_t cap = slot_bytes_ * static_cast<size_t>(n);  // a whole half per step
  auto* p = static_cast<char*>(buf);
  size_t off = 0;
  bool first = true;
  do {
    const uint64_t e = sync_.next_step();
    const size_t m = std::min(cap, bytes - off);
    char* half = slot(e, 0);
    if (is_root) {
      KOLO_RETURN_IF_ERROR(record(sync_.prepare(e)));
      copy_bytes(half, p + off, m);  // a 0-byte broadcast may pass no buffer: copies nothing
    }
    KOLO_RETURN_IF_ERROR(record(sync_.arrive(e, d)));
    // The first step checks that everyone called the same broadcast; after that the root
    // runs a step ahead of the readers (pipelining), bounded by prepare().
    if (first) KOLO_RETURN_IF_ERROR(record(sync_.wait_all(e, true)));
    if (!is_root) {
      KOLO_RETURN_IF_ERROR(record(sync_.wait_for(root, e)));
      copy_bytes(p + off, half, m);
    }
    off += m;
    first = false;
  } while (off < bytes);
  return Status::ok();
}

Status ShmGroup::allgatherv(const void* in, void* out, const std::vector<size_t>& sizes) {
  KOLO_RETURN_IF_ERROR(usable());
  const int n = opts_.local_size;
  const int r = opts_.local_rank;
  if (sizes.size() != static_cast<size_t>(n)) {
    return Status::invalid_argument("shared memory: allgatherv got " + std::to_string(sizes.size()) +
                                    " sizes for " + std::to_string(n) + " local ranks");
  }
  std::vector<size_t> displ(static_cast<size_t>(n) + 1, 0);
  for (int j = 0; j < n; ++j) displ[j + 1] = displ[j] + sizes[j];
  if ((in == nullptr && sizes[r] > 0) || (out == nullptr && displ[n] > 0)) {
    return Status::invalid_argument("shared memory: allgatherv of a null buffer");
  }
  auto* o = static_cast<char*>(out);
  if (sizes[r] > 0 && in != o + displ[r]) std::memmove(o + displ[r], in, sizes[r]);
  if (n == 1) return Status::ok();
  const CallDesc d{pack(Kind::kAllgatherv, 0), hash_sizes(sizes)};
  const size_t most = *std::max_element(sizes.begin(), sizes.end());
  const size_t rounds = std::max<size_t>(1, (most + slot_bytes_ - 1) / slot_bytes_);
  for (size_t k = 0; k < rounds; ++k) {
    const uint64_t e = sync_.next_step();
    const size_t from = k * slot_bytes_;
    KOLO_RETURN_IF_ERROR(record(sync_.prepare(e)));
    if (sizes[r] > from) copy_bytes(slot(e, r), o + displ[r] + from, std::min(slot_bytes_, sizes[r] - from));
    KOLO_RETURN_IF_ERROR(record(sync_.arrive(e, d)));
    KOLO_RETURN_IF_ERROR(record(sync_.wait_all(e, k == 0)));
    for (int j = 0; j < n; ++j) {
      if (j == r || sizes[j] <= from) continue;
      copy_bytes(o + displ[j] + from, slot(e, j), std::min(slot_bytes_, sizes[j] - from));
    }
  }
  return Status::ok();
}

}  // namespace kolo::shm

// kolo's shared-memory Executor: ops/shm/shm_executor.h.
#include "ops/shm/shm_executor.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "core/fast_board.h"
#include "core/logging.h"
#include "ops/ordered_allreduce.h"

namespace kolo::shm {
namespace {

// "/kolo-<pid of rank 0>-<nanoseconds at rank 0>-<world rank of this host's leader>": unique
// per job and host, identical on the ranks of one host.
std::string segment_name(MPI_Comm world, MPI_Comm local, int world_rank) {
  long long id[2] = {static_cast<long long>(getpid()),
                     static_cast<long long>(std::chrono::steady_clock::now().time_since_epoch().count())};
  MPI_Bcast(id, 2, MPI_LONG_LONG, 0, world);
  int leader = world_rank;
  MPI_Bcast(&leader, 1, MPI_INT, 0, local);
  return "/kolo-" + std::to_string(id[0]) + "-" + std::to_string(id[1]) + "-" + std::to_string(leader);
}

// KOLO_SHM_ARENA_BYTES=auto: per rank min(2 GiB, size of /dev/shm / local ranks), rounded
// down to 4 KiB, where zero copy applies (one host, at least two ranks); 0 and *why
// elsewhere. Collective over `local` (local rank 0's statvfs decides, so the host agrees).
size_t auto_arena_bytes(const Topology& topo, MPI_Comm local, std::string* why) {
  if (topo.local_size != topo.size) {
    *why = "KOLO_SHM_ARENA_BYTES=auto makes none across several hosts (zero copy is for one host)";
    return 0;
  }
  if (topo.local_size < 2) {
    *why = "KOLO_SHM_ARENA_BYTES=auto makes none for a single rank (nothing to share with)";
    return 0;
  }
  unsigned long long total = 0;
  struct statvfs fs {};
  if (topo.local_rank == 0 && statvfs("/dev/shm", &fs) == 0) {
    total = static_cast<unsigned long long>(fs.f_blocks) * fs.f_frsize;
  }
  MPI_Bcast(&total, 1, MPI_UNSIGNED_LONG_LONG, 0, local);
  const size_t bytes = std::min<size_t>(kAutoArenaMaxBytes, total / static_cast<size_t>(topo.local_size)) / 4096 * 4096;
  if (bytes == 0) *why = "KOLO_SHM_ARENA_BYTES=auto: /dev/shm's size is unknown or too small";
  return bytes;
}

}  // namespace

Status ShmExecutor::create(const Topology& topo, MPI_Comm world, MPI_Comm local, MPI_Comm cross,
                           const Options& options, std::unique_ptr<ShmExecutor>* out) {
  std::unique_ptr<ShmExecutor> x(new ShmExecutor());
  ShmGroup::Options o;
  o.name = segment_name(world, local, topo.rank);
  o.local_rank = topo.local_rank;
  o.local_size = topo.local_size;
  o.segment_bytes = 2 * static_cast<size_t>(topo.local_size) * std::max<size_t>(options.chunk_bytes, 4096);
  o.small_bytes = options.small_bytes;
  o.peer_timeout = options.peer_timeout;
  o.arena_chunk_bytes = options.arena_chunk_bytes;
  Status s = ShmGroup::create(o, mpi_agree(local), &x->group_);
  // The arena: explicit size (failure fails the executor, as the user asked for it) or auto
  // (failure only means no arena). Every rank of a host reaches the same branch: the group
  // and the arena are created or refused on all of them alike.
  std::string why_none = "KOLO_SHM_ARENA_BYTES=0";
  if (s.is_ok()) {
    const size_t bytes = options.arena_auto ? auto_arena_bytes(topo, local, &why_none) : options.arena_bytes;
    if (bytes > 0) {
      Status a = ShmArena::create({o.name + "-g", topo.local_rank, topo.local_size, bytes}, mpi_agree(local),
                                  &x->arena_);
      if (!a.is_ok() && options.arena_auto) {
        why_none = "KOLO_SHM_ARENA_BYTES=auto could not set it up: " + a.message();
        KOLO_LOG(LogLevel::kInfo, "shared memory: no zero-copy arena: " << a.message());
      } else if (!a.is_ok()) {
        s = a;
      }
    }
  }
  // The result pool, for alltoall on one host (a failure only means none).
  if (s.is_ok() && topo.local_size == topo.size && topo.local_size > 1 && options.result_pool_bytes > 0) {
    Status p = ShmResultPool::create({o.name + "-r", topo.local_rank, topo.local_size, options.result_pool_bytes},
                                     mpi_agree(local), &x->pool_);
    if (!p.is_ok()) KOLO_LOG(LogLevel::kInfo, "shared memory: no result pool: " << p.message());
  }
  // Every host must have its group, or no rank may use one (executor choice must agree);
  // every rank its arena, or none keeps one (allocate_shared must agree too); and every
  // rank its result pool, or none uses one (alltoall's path must agree).
  int ok[3] = {s.is_ok() ? 1 : 0, x->arena_ != nullptr ? 1 : 0, x->pool_ != nullptr ? 1 : 0}, all[3] = {0, 0, 0};
  MPI_Allreduce(ok, all, 3, MPI_INT, MPI_MIN, world);
  if (all[2] == 0 && x->pool_ != nullptr) {
    x->pool_->retire();
    x->pool_ = nullptr;
  }
  if (!s.is_ok()) return s;
  if (all[0] == 0) return Status::communication("shared memory: another host could not set up its segment");
  if (all[1] == 0 && x->arena_ != nullptr) {
    x->arena_.reset();
    why_none = "KOLO_SHM_ARENA_BYTES=auto: another rank could not set up its arena";
    KOLO_LOG(LogLevel::kInfo, "shared memory: no zero-copy arena: another rank could not set one up");
  }
  if (x->arena_ != nullptr) {
    KOLO_LOG(LogLevel::kDebug, "shared memory: zero-copy arena of " << x->arena_->bytes_per_rank()
                                                                    << " bytes per rank reserved (committed as used)");
  }
  x->single_host_ = topo.local_size == topo.size;
  x->deterministic_ = options.deterministic;
  if (x->single_host_ && topo.size > 1 && options.fast_board_capacity > 0) {
    // Collective over the host (every rank reaches here); a failure only means no fast path.
    const size_t bytes = FastBoard::bytes_needed(topo.size, options.fast_board_capacity);
    Status b = SharedMapping::establish(
        o.name + "-f", bytes, topo.local_rank == 0, mpi_agree(local), [](void*) {},
        [](void*) { return Status::ok(); }, &x->board_);
    if (!b.is_ok()) {
      x->board_ = SharedMapping();  // mapped here or not: no rank keeps one
      KOLO_LOG(LogLevel::kInfo, "shared memory: no fast-path board: " << b.message());
    }
  }
  x->comms_ = {topo.local_rank == 0 ? cross : MPI_COMM_NULL, topo.size, options.liveness};
  // The sliced path needs a partner with the same local rank on every host: the same number
  // of ranks on every host. It is taken, and fp16/bf16 travel in 16 bits on it, only where
  // every rank asks for it (a rank launched with other settings must not leave the others
  // waiting for messages of another size); every rank computes the same answer.
  int mine[4] = {topo.local_size, -topo.local_size, options.sliced_cross_host ? 1 : 0, options.half_wire ? 1 : 0};
  int least[4] = {0, 0, 0, 0};
  MPI_Allreduce(mine, least, 4, MPI_INT, MPI_MIN, world);
  if (!x->single_host_ && least[2] == 1 && least[0] == -least[1] && cross != MPI_COMM_NULL) {
    x->sliced_ = std::make_unique<SlicedState>(cross, options.liveness);
    x->sliced_->half_wire = least[3] == 1;
    x->comms_.sliced = x->sliced_.get();
  }
  if (!x->single_host_ && (least[2] != mine[2] || least[3] != mine[3])) {
    KOLO_LOG(LogLevel::kWarning, "KOLO_CROSS_HOST_ALLREDUCE or KOLO_CROSS_HOST_HALF_WIRE differs between ranks; "
                                 "every rank uses "
                                     << (least[2] == 1 ? "sliced" : "leader") << " and "
                                     << (least[3] == 1 ? "16-bit" : "float32") << " values between hosts");
  }
  if (Liveness* l = options.liveness)
    x->group_->set_watch([l] { return l->check("waiting for a peer in a shared-memory collective"); });
  // While it waits for a local peer, a rank keeps its transfers between hosts moving: a
  // peer on another host may be waiting for them, and the link must not idle.
  if (SlicedState* sliced = x->sliced_.get()) x->group_->set_idle([sliced] { return sliced->ring.poll(); });
  x->publishes_arena_ = options.publishes_arena;
  if (x->publishes_arena_) publish_arena(x->arena_.get(), why_none);
  *out = std::move(x);
  return Status::ok();
}

ShmExecutor::~ShmExecutor() {
  if (publishes_arena_) publish_arena(nullptr);  // kolo/memory.h: valid until shutdown
  if (pool_ != nullptr) pool_->retire();  // results the user still holds stay valid
}

bool ShmExecutor::accepts(const Response& r) const {
  if (!r.device.is_cpu() || r.type == Response::Type::kError) return false;
  if (single_host_) return true;
  // Across hosts only allreduce, and not a float sum that must come out in rank order: the
  // hierarchical paths add host partials, (x0 + x1) + (x2 + x3), not ((x0 + x1) + x2) + x3.
  return r.type == Response::Type::kAllreduce && !(deterministic_ && ops::order_matters(r.dtype, r.reduce_op));
}

Status ShmExecutor::execute(const Response& r, std::vector<TensorEntry>& entries) {
  Status s = Status::internal("shared-memory executor given an error response");
  switch (r.type) {
    case Response::Type::kAllreduce:
      phase(entries, single_host_ ? "SHM_ALLREDUCE" : "HIERARCHICAL_ALLREDUCE");
      s = allreduce(r, entries);
      break;
    case Response::Type::kBroadcast:
      phase(entries, "SHM_BROADCAST");
      s = broadcast(r, entries);
      break;
    case Response::Type::kAllgather:
      phase(entries, "SHM_ALLGATHER");
      s = allgather(r, entries);
      break;
    case Response::Type::kAlltoall:
      phase(entries, "SHM_ALLTOALL");
      s = alltoall(r, entries);
      break;
    case Response::Type::kReducescatter:
      phase(entries, "SHM_REDUCESCATTER");
      s = reducescatter(r, entries);
      break;
    case Response::Type::kError: break;
  }
  phase(entries, "");
  return s;
}

// Zero copy when every piece lies in the arena — unless the response is small enough for the
// one-step slot path: one barrier (and a copy of a few KB) beats zero copy's three. Every
// rank sees the same sizes, so all choose alike; both paths give bitwise the same result.
bool ShmExecutor::zero_copy(DType dtype) const {
  if (!single_host_ || arena_ == nullptr) return false;
  size_t bytes = 0;
  for (const Piece& p : pieces_) {
    if (p.count > 0 && !arena_->contains(p.data, p.count * dtype_size(dtype))) return false;
    bytes += p.count * dtype_size(dtype);
  }
  return bytes > group_->small_bytes();
}

Status ShmExecutor::allreduce(const Response& r, std::vector<TensorEntry>& entries) {
  pieces_.clear();
  for (TensorEntry& e : entries) pieces_.push_back({e.view.data, static_cast<size_t>(e.view.num_elements())});
  if (!single_host_) {
    return hierarchical_allreduce(*group_, comms_, pieces_, r.dtype, r.reduce_op, r.prescale, r.postscale);
  }
  Status s;
  // A rank that joined (kolo::join()) reduces a stand-in outside the arena: no zero copy.
  if (r.joined.empty() && zero_copy(r.dtype)) {
    if (zero_copy_calls_++ == 0) {
      KOLO_LOG(LogLevel::kDebug, "shared memory: zero-copy allreduce in use (\"" << r.names[0] << "\" first)");
    }
    s = group_->allreduce_in_arena(*arena_, pieces_, r.dtype, r.reduce_op, r.prescale, r.postscale);
  } else {
    // With an arena every rank says where its tensors lie, so that a rank whose tensors are
    // in it while a peer's are not fails this collective (not the group, not a later one).
    // Not with joined ranks: a joined rank's stand-in is private by design while its peers'
    // gradients may lie in the arena, and this path copies through the slots either way.
    const bool check = arena_ != nullptr && r.joined.empty();
    const uint64_t placement = check ? placement_of(*arena_, pieces_, dtype_size(r.dtype)) : 0;
    s = group_->allreduce(pieces_, r.dtype, r.reduce_op, r.prescale, r.postscale, placement);
  }
  if (s.code() == Status::Code::kMismatch && group_->health().is_ok()) return placement_error(r);
  return s;
}

// Every rank learns where every rank's tensors lie (one allgather of an offset per tensor:
// only after a placement mismatch, never on the normal path) and names the tensors that
// differ, with the ranks on each side. Every rank builds the same message.
Status ShmExecutor::placement_error(const Response& r) {
  const size_t k = pieces_.size();
  const int n = group_->local_size();
  const size_t esize = dtype_size(r.dtype);
  std::vector<uint64_t> mine(k), all(k * static_cast<size_t>(n));
  for (size_t i = 0; i < k; ++i) mine[i] = piece_placement(*arena_, pieces_[i], esize);
  Status g = group_->allgatherv(mine.data(), all.data(), std::vector<size_t>(static_cast<size_t>(n), k * 8));
  if (!g.is_ok()) return g;
  std::string detail;
  size_t differing = 0;
  for (size_t i = 0; i < k; ++i) {
    std::vector<std::pair<uint64_t, std::string>> where;  // placement -> ranks
    for (int j = 0; j < n; ++j) {
      const uint64_t p = all[static_cast<size_t>(j) * k + i];
      auto it = std::find_if(where.begin(), where.end(), [&](const auto& w) { return w.first == p; });
      if (it == where.end()) where.push_back({p, std::to_string(j)});
      else it->second.append(",").append(std::to_string(j));
    }
    if (where.size() < 2 || ++differing > 3) continue;
    if (!detail.empty()) detail += "; ";
    if (k > 1) detail += "\"" + r.names[i] + "\" is ";
    detail += "in ";
    for (size_t w = 0; w < where.size(); ++w) {
      if (w > 0) detail += " but in ";
      detail += where[w].first == 0 ? "private memory"
                                    : "kolo's shared memory (offset " + std::to_string(where[w].first - 1) + ")";
      detail += " on rank" + std::string(where[w].second.find(',') != std::string::npos ? "s " : " ") + where[w].second;
    }
  }
  if (differing > 3) detail += "; and " + std::to_string(differing - 3) + " more tensors of this fused allreduce";
  if (differing == 0) detail = "the ranks' tensors lie in different places (no single tensor differs)";
  return Status::mismatch("allreduce \"" + r.names[0] + "\"" +
                          (k > 1 ? " (fused with " + std::to_string(k - 1) + " more)" : std::string()) + ": " + detail +
                          ". Every rank must place a collective's tensors alike: all in kolo's shared memory at "
                          "the same offsets (allocate alike, kolo/memory.h) or all private. Only this collective "
                          "failed.");
}

// Single host only: local ranks are world ranks (the local communicator is ordered by them).
Status ShmExecutor::broadcast(const Response& r, std::vector<TensorEntry>& entries) {
  for (TensorEntry& e : entries) KOLO_RETURN_IF_ERROR(group_->broadcast(e.view.data, e.view.num_bytes(), r.root));
  return Status::ok();
}

Status ShmExecutor::allgather(const Response& r, std::vector<TensorEntry>& entries) {
  TensorEntry& e = entries.at(0);
  const Shape& shape = e.view.shape;
  const size_t row_bytes =
      static_cast<size_t>(num_elements(Shape(shape.begin() + 1, shape.end()))) * dtype_size(r.dtype);
  std::vector<size_t> bytes;
  int64_t rows = 0;
  for (int64_t s : r.sizes) {
    bytes.push_back(static_cast<size_t>(s) * row_bytes);
    rows += s;
  }
  Tensor& out = e.handle->extra().gathered;
  out.dtype = r.dtype;
  out.shape = shape;
  out.shape[0] = rows;
  out.bytes.resize(static_cast<size_t>(rows) * row_bytes);
  return group_->allgatherv(e.view.data, out.bytes.data(), bytes);
}

// Single host only (accepts()): local ranks are world ranks.
Status ShmExecutor::alltoall(const Response& r, std::vector<TensorEntry>& entries) {
  TensorEntry& e = entries.at(0);
  const int n = group_->local_size();
  std::vector<int64_t> send_rows, recv_rows;
  size_t row_bytes = 0;
  void* dest = nullptr;
  Status unfit;
  {
    // A result kolo allocates goes in the pool where it fits: the peers then write into it
    // (as into a caller's output in the arena).
    kolo::detail::TensorSourceScope from_pool(pool_);
    row_bytes = prepare_alltoall_output(r, group_->local_rank(), n, e, &send_rows, &recv_rows, &dest, &unfit);
  }
  std::vector<size_t> bytes(r.sizes.size());
  for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<size_t>(r.sizes[k]) * row_bytes;
  KOLO_RETURN_IF_ERROR(group_->alltoallv(e.view.data, dest, bytes, pool_, arena_.get()));
  return unfit;
}

Status ShmExecutor::reducescatter(const Response& r, std::vector<TensorEntry>& entries) {
  const int n = group_->local_size();
  std::vector<size_t> lo(static_cast<size_t>(n) + 1, 0);
  for (TensorEntry& e : entries) {
    int64_t first_row = 0, rows = 0;
    const size_t row_elems = prepare_reducescatter_output(r, group_->local_rank(), n, e, &first_row, &rows);
    for (int j = 0; j < n; ++j)
      lo[j + 1] = lo[j] + static_cast<size_t>(reducescatter_rows(e.view.shape[0], n, j)) * row_elems;
    KOLO_RETURN_IF_ERROR(group_->reduce_scatter(e.view.data, e.handle->extra().gathered.bytes.data(), lo, r.dtype,
                                                r.reduce_op, r.prescale, r.postscale));
  }
  return Status::ok();
}

}  // namespace kolo::shm

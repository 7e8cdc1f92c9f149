// Cross-host composition of the shared-memory engine with MPI: shm_hierarchical.h.
#include "ops/shm/shm_hierarchical.h"

#include <algorithm>
#include <climits>
#include <vector>

#include "kernels/cpu_reduce.h"
#include "ops/mpi_util.h"
#include "ops/shm/shm_pieces.h"

namespace kolo::shm {
namespace {

Status mpi_failed(const char* call, int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::communication(std::string("hierarchical allreduce: ") + call + " failed: " +
                               std::string(text, static_cast<size_t>(len)));
}

}  // namespace

ShmGroup::Agree mpi_agree(MPI_Comm local_comm) {
  return [local_comm](bool ok, bool* all) -> Status {
    int in = ok ? 1 : 0;
    int out = 0;
    const int rc = MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, local_comm);
    if (rc != MPI_SUCCESS) return mpi_failed("MPI_Allreduce (agree)", rc);
    *all = out != 0;
    return Status::ok();
  };
}

namespace {

constexpr size_t kLeaderChunkBytes = size_t{4} << 20;

// The leader's step: allreduce among hosts, then the scales. MPI counts are ints, so huge
// pieces go in parts.
Status leaders_allreduce(const HierarchicalComms& comms, std::span<const Piece> pieces,
                         DType dtype, ReduceOp op, double postscale) {
  const size_t esize = dtype_size(dtype);
  int hosts = 1;
  if (comms.cross_comm != MPI_COMM_NULL) MPI_Comm_size(comms.cross_comm, &hosts);
  for (const Piece& p : pieces) {
    auto* base = static_cast<char*>(p.data);
    for (size_t done = 0; hosts > 1 && done < p.count;) {
      // In pieces of kLeaderChunkBytes: one poll of a nonblocking collective may do a whole
      // piece's work, and the waits must keep answering heartbeats (core/liveness.h).
      const size_t n = std::min<size_t>(p.count - done, std::max<size_t>(1, kLeaderChunkBytes / esize));
      MPI_Request req;
      const int rc = MPI_Iallreduce(MPI_IN_PLACE, base + done * esize, static_cast<int>(n), ops::mpi_dtype(dtype),
                                    ops::mpi_reduce_op(dtype, op), comms.cross_comm, &req);
      if (rc != MPI_SUCCESS) return mpi_failed("MPI_Iallreduce (between hosts)", rc);
      KOLO_RETURN_IF_ERROR(ops::wait_request(&req, "MPI_Iallreduce between hosts", comms.liveness));
      done += n;
    }
    ops::apply_postscale(p.data, p.count, dtype, op, comms.global_size, postscale);
  }
  return Status::ok();
}

// fp16/bf16: the host's partial sums stay in float32 into the step between hosts, and the
// result is rounded to 16 bits once, on the leader, before the broadcast. A chunk at a
// time: every rank widens its values (times the prescale) into float32 scratch, the host
// reduces that to its leader, the leaders allreduce it in float32, the leader scales and
// rounds it into its tensors, and the host broadcasts those 16-bit values.
Status hierarchical_half(ShmGroup& local, const HierarchicalComms& comms, std::span<const Piece> pieces,
                         DType dtype, ReduceOp op, double prescale, double postscale) {
  const detail::Pieces all(pieces, 2);
  const size_t total = all.total();
  const size_t chunk = std::max<size_t>(local.slot_bytes() / sizeof(float), 1024);
  std::vector<float> wide(std::min(total, chunk));
  const float pre = static_cast<float>(prescale);
  const float f = static_cast<float>(ops::post_factor(op, comms.global_size, postscale));
  int hosts = 1;
  if (comms.cross_comm != MPI_COMM_NULL) MPI_Comm_size(comms.cross_comm, &hosts);
  for (size_t off = 0; off < total; off += chunk) {
    const size_t m = std::min(chunk, total - off);
    all.for_range(off, m, [&](char* user, size_t done, size_t cnt) {
      ops::widen_half(wide.data() + done, user, cnt, dtype, pre);
    });
    KOLO_RETURN_IF_ERROR(local.reduce_to_leader(wide.data(), m, DType::kFloat32, op));
    if (local.local_rank() == 0) {
      if (hosts > 1) {
        MPI_Request req = MPI_REQUEST_NULL;
        const int rc = MPI_Iallreduce(MPI_IN_PLACE, wide.data(), static_cast<int>(m), MPI_FLOAT,
                                      ops::mpi_reduce_op(DType::kFloat32, op), comms.cross_comm, &req);
        if (rc != MPI_SUCCESS) return local.abort(mpi_failed("MPI_Iallreduce (between hosts)", rc));
        Status w = ops::wait_request(&req, "MPI_Iallreduce between hosts", comms.liveness);
        if (!w.is_ok()) return local.abort(w);
      }
      all.for_range(off, m, [&](char* user, size_t done, size_t cnt) {
        ops::narrow_half(user, wide.data() + done, cnt, dtype, f);
      });
    }
    Status s;
    all.for_range(off, m, [&](char* user, size_t, size_t cnt) {
      if (s.is_ok()) s = local.broadcast(user, cnt * 2, 0);
    });
    KOLO_RETURN_IF_ERROR(s);
  }
  return Status::ok();
}

}  // namespace

Status hierarchical_allreduce(ShmGroup& local, const HierarchicalComms& comms,
                              std::span<const Piece> pieces, DType dtype, ReduceOp op,
                              double prescale, double postscale) {
  if (comms.global_size < 1) {
    return Status::invalid_argument("hierarchical allreduce: global size must be positive");
  }
  if (comms.sliced != nullptr) return sliced_allreduce(local, comms, pieces, dtype, op, prescale, postscale);
  if (ops::is_half_float(dtype)) return hierarchical_half(local, comms, pieces, dtype, op, prescale, postscale);
  KOLO_RETURN_IF_ERROR(local.reduce_to_leader(pieces, dtype, op, prescale));
  if (local.local_rank() == 0) {
    Status s = leaders_allreduce(comms, pieces, dtype, op, postscale);
    if (!s.is_ok()) return local.abort(s);
  }
  const size_t esize = dtype_size(dtype);
  for (const Piece& p : pieces) KOLO_RETURN_IF_ERROR(local.broadcast(p.data, p.count * esize, 0));
  return Status::ok();
}

}  // namespace kolo::shm

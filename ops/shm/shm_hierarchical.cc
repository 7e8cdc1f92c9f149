// Cross-host composition of the shared-memory engine with MPI: shm_hierarchical.h.
#include "ops/shm/shm_hierarchical.h"

#include "ops/mpi_util.h"

#include <algorithm>
#include <climits>

#include "ops/cpu_reduce.h"

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

}  // namespace

Status hierarchical_allreduce(ShmGroup& local, const HierarchicalComms& comms,
                              std::span<const Piece> pieces, DType dtype, ReduceOp op,
                              double prescale, double postscale) {
  if (comms.global_size < 1) {
    return Status::invalid_argument("hierarchical allreduce: global size must be positive");
  }
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

// Cross-host composition of the shared-memory engine with MPI: shm_hierarchical.h.
#include "ops/shm/shm_hierarchical.h"

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

// inout = in (op) inout, for the 16-bit floats MPI cannot reduce itself. Both orders give
// the same bits: every kolo reduce op is commutative.
template <DType T, ReduceOp O>
void reduce_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  ops::reduce_into(inout, in, static_cast<size_t>(*len), T, O);
}

template <DType T>
MPI_Op user_op(ReduceOp op) {
  static MPI_Op table[kNumReduceOps] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL,
                                        MPI_OP_NULL};
  MPI_Op& slot = table[static_cast<int>(op)];
  if (slot != MPI_OP_NULL) return slot;
  MPI_User_function* fn = nullptr;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: fn = &reduce_16bit<T, ReduceOp::kSum>; break;
    case ReduceOp::kMin: fn = &reduce_16bit<T, ReduceOp::kMin>; break;
    case ReduceOp::kMax: fn = &reduce_16bit<T, ReduceOp::kMax>; break;
    case ReduceOp::kProduct: fn = &reduce_16bit<T, ReduceOp::kProduct>; break;
  }
  MPI_Op_create(fn, /*commute=*/1, &slot);
  return slot;
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

MPI_Datatype mpi_datatype(DType dtype) {
  switch (dtype) {
    case DType::kUInt8: return MPI_UINT8_T;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kFloat16:
    case DType::kBFloat16: return MPI_UINT16_T;
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(DType dtype, ReduceOp op) {
  if (dtype == DType::kFloat16) return user_op<DType::kFloat16>(op);
  if (dtype == DType::kBFloat16) return user_op<DType::kBFloat16>(op);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return MPI_SUM;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kProduct: return MPI_PROD;
  }
  return MPI_OP_NULL;
}

namespace {

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
      const size_t n = std::min<size_t>(p.count - done, INT_MAX / 2);
      const int rc = MPI_Allreduce(MPI_IN_PLACE, base + done * esize, static_cast<int>(n),
                                   mpi_datatype(dtype), mpi_op(dtype, op), comms.cross_comm);
      if (rc != MPI_SUCCESS) return mpi_failed("MPI_Allreduce (between hosts)", rc);
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

#include "ops/mpi_util.h"

#include <sched.h>

#include <chrono>

#include "kernels/cpu_reduce.h"

#if defined(__SANITIZE_THREAD__)
extern "C" void AnnotateBenignRaceSized(const char* file, int line, const volatile void* mem, size_t size,
                                        const char* description);
#endif

namespace kolo::ops {

void mpi_buffer_for_tsan(const void* buf, size_t bytes) {
#if defined(__SANITIZE_THREAD__)
  if (bytes > 0) AnnotateBenignRaceSized(__FILE__, __LINE__, buf, bytes, "written and read by MPI's progress engine");
#else
  (void)buf;
  (void)bytes;
#endif
}

namespace {

// [0] fp16, [1] bf16; index by ReduceOp.
MPI_Op g_half_ops[2][kNumReduceOps];
bool g_half_ops_created = false;

template <int kHalfKind, int kOp>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  constexpr DType t = kHalfKind == 0 ? DType::kFloat16 : DType::kBFloat16;
  reduce_into(inout, in, static_cast<size_t>(*len), t, static_cast<ReduceOp>(kOp));
}

template <int kHalfKind>
void create_for(MPI_Op* ops) {
  MPI_Op_create(&half_reduce<kHalfKind, 0>, 1, &ops[0]);
  MPI_Op_create(&half_reduce<kHalfKind, 1>, 1, &ops[1]);
  MPI_Op_create(&half_reduce<kHalfKind, 2>, 1, &ops[2]);
  MPI_Op_create(&half_reduce<kHalfKind, 3>, 1, &ops[3]);
  MPI_Op_create(&half_reduce<kHalfKind, 4>, 1, &ops[4]);
}

}  // namespace

Status mpi_status(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return Status::ok();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::communication(what + ": MPI error: " + std::string(text, static_cast<size_t>(len)));
}

Status wait_request(MPI_Request* req, const char* what, Liveness* liveness) {
  int done = 0;
  for (int i = 0; i < 64; ++i) {  // the common case: done within microseconds
    KOLO_RETURN_IF_ERROR(mpi_status(MPI_Test(req, &done, MPI_STATUS_IGNORE), what));
    if (done) return Status::ok();
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string during = std::string("waiting in ") + what;
  for (;;) {
    KOLO_RETURN_IF_ERROR(mpi_status(MPI_Test(req, &done, MPI_STATUS_IGNORE), what));
    if (done) return Status::ok();
    if (liveness != nullptr) KOLO_RETURN_IF_ERROR(liveness->check(during.c_str()));
    if (std::chrono::steady_clock::now() - start > std::chrono::microseconds(100)) sched_yield();
  }
}

void create_half_ops() {
  if (g_half_ops_created) return;
  create_for<0>(g_half_ops[0]);
  create_for<1>(g_half_ops[1]);
  g_half_ops_created = true;
}

void free_half_ops() {
  if (!g_half_ops_created) return;
  for (auto& row : g_half_ops)
    for (MPI_Op& op : row) MPI_Op_free(&op);
  g_half_ops_created = false;
}

MPI_Datatype mpi_dtype(DType t) {
  switch (t) {
    case DType::kUInt8: return MPI_UINT8_T;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kFloat16:
    case DType::kBFloat16: return MPI_UINT16_T;
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
    case DType::kInt8: return MPI_INT8_T;
    case DType::kInt16: return MPI_INT16_T;
    case DType::kBool: return MPI_UINT8_T;  // bytes 0/1, reduced with MAX (OR) and MIN (AND)
  }
  return MPI_BYTE;
}

MPI_Op mpi_reduce_op(DType t, ReduceOp op) {
  if (t == DType::kFloat16 || t == DType::kBFloat16) {
    create_half_ops();  // idempotent: code that runs without the backend (tests) gets them too
    return g_half_ops[t == DType::kFloat16 ? 0 : 1][static_cast<int>(op)];
  }
  if (t == DType::kBool)  // torch.distributed's meaning: Sum/Max/Average = OR, Product/Min = AND
    return op == ReduceOp::kProduct || op == ReduceOp::kMin ? MPI_MIN : MPI_MAX;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return MPI_SUM;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kProduct: return MPI_PROD;
  }
  return MPI_SUM;
}

}  // namespace kolo::ops

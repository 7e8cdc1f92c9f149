// ops/gpu/nccl_types.h — kolo's dtypes and reduce ops in NCCL's terms, shared by the NCCL
// executor and the hierarchical allreduce.
// Average reduces with ncclSum: the division happens in kolo's postscale kernel, exactly as
// on CPU (ncclAvg would round differently for fp16 and does not exist for integers).
// Thread safety: pure functions.
#pragma once

#include <nccl.h>

#include "kolo/types.h"

namespace kolo::ops::gpu {

inline ncclDataType_t nccl_dtype(DType t) {
  switch (t) {
    case DType::kUInt8: return ncclUint8;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat64: return ncclFloat64;
    case DType::kInt8: return ncclInt8;
    case DType::kBool: return ncclUint8;
    case DType::kInt16: break;  // NCCL has no 16-bit integer: reductions are refused (nccl_reduces)
  }
  return ncclUint8;
}

// Whether NCCL can reduce `t` (every dtype can be moved as bytes).
inline bool nccl_reduces(DType t) { return t != DType::kInt16; }

// Bool is reduced as bytes 0/1, as torch.distributed does: Sum/Max = OR, Product/Min = AND.
inline ncclRedOp_t nccl_op(DType t, ReduceOp op) {
  if (t == DType::kBool) return op == ReduceOp::kProduct || op == ReduceOp::kMin ? ncclMin : ncclMax;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return ncclSum;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kProduct: return ncclProd;
  }
  return ncclSum;
}

}  // namespace kolo::ops::gpu

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
  }
  return ncclUint8;
}

inline ncclRedOp_t nccl_op(ReduceOp op) {
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

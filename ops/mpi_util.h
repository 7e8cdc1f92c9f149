// ops/mpi_util.h — small helpers shared by kolo's MPI code: error translation, datatype and
// reduction-operator mapping (fp16/bf16 through user-defined ops that accumulate in fp32).
//
// Thread safety: mpi_reduce_op/mpi_dtype read tables created once by create_half_ops().
#pragma once

#include <mpi.h>

#include <string>

#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo::ops {

// Status::ok() for MPI_SUCCESS, else a communication error naming `what` and MPI's text.
Status mpi_status(int rc, const std::string& what);

// Creates / frees the user-defined MPI ops for 16-bit floats. Call after MPI_Init and
// before MPI_Finalize respectively.
void create_half_ops();
void free_half_ops();

// The MPI datatype carrying elements of `t` (16-bit floats travel as MPI_UINT16_T).
MPI_Datatype mpi_dtype(DType t);
// The MPI op that combines `t` elements for `op` (Average uses the Sum op).
MPI_Op mpi_reduce_op(DType t, ReduceOp op);

}  // namespace kolo::ops

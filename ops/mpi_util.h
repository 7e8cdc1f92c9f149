// ops/mpi_util.h — small helpers shared by kolo's MPI code: error translation, datatype and
// reduction-operator mapping (fp16/bf16 through user-defined ops that accumulate in fp32).
//
// Thread safety: mpi_reduce_op/mpi_dtype read tables created once by create_half_ops().
#pragma once

#include <mpi.h>

#include <string>

#include "core/liveness.h"
#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo::ops {

// Status::ok() for MPI_SUCCESS, else a communication error naming `what` and MPI's text.
Status mpi_status(int rc, const std::string& what);

// Waits for `req` to complete, polling it (MPI_Test; after the first ~100 us it yields the
// CPU between polls). Between polls it asks `liveness` (may be null) whether a peer died;
// if one did it returns that error and leaves the request incomplete: a nonblocking
// collective cannot be cancelled, so MPI may still hold the buffer (docs/runtime.md).
// `what` names the call in the messages ("MPI_Iallreduce").
Status wait_request(MPI_Request* req, const char* what, Liveness* liveness);

// Creates / frees the user-defined MPI ops for 16-bit floats. Call after MPI_Init and
// before MPI_Finalize respectively.
void create_half_ops();
void free_half_ops();

// The MPI datatype carrying elements of `t` (16-bit floats travel as MPI_UINT16_T).
MPI_Datatype mpi_dtype(DType t);
// The MPI op that combines `t` elements for `op` (Average uses the Sum op).
MPI_Op mpi_reduce_op(DType t, ReduceOp op);

}  // namespace kolo::ops

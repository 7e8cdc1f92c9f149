// ops/mpi_util.h — small helpers shared by kolo's MPI code: error translation, datatype and
// reduction-operator mapping (fp16/bf16 through user-defined ops that accumulate in fp32).
//
// Thread safety: mpi_reduce_op/mpi_dtype read tables created once by create_half_ops().
#pragma once

#include <mpi.h>

#include <cstddef>
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

// ThreadSanitizer builds only (a no-op otherwise): declares `bytes` at `buf` a buffer of MPI
// sends and receives whose races TSan is to ignore. Open MPI copies data out of a send buffer
// and into a receive buffer on whichever thread runs its progress engine (any thread inside
// any MPI call: the program's, kolo's heartbeat thread), and the completion synchronises
// inside the uninstrumented library, so TSan took every word the owner touched afterwards as
// a race; each one, suppressed, still cost a lookup in a list that grows with every address
// (quadratic: ~1.4 s for 32K words, minutes for a 1 MB segment: the > 60 s TSan stall of the
// cross-host tests, docs/correctness.md). TSan keeps every declaration for the process's
// lifetime: declare long-lived buffers, once per allocation. Races on them between kolo's own
// threads go unreported too.
void mpi_buffer_for_tsan(const void* buf, size_t bytes);

// Creates / frees the user-defined MPI ops for 16-bit floats. Call after MPI_Init and
// before MPI_Finalize respectively.
void create_half_ops();
void free_half_ops();

// The MPI datatype carrying elements of `t` (16-bit floats travel as MPI_UINT16_T).
MPI_Datatype mpi_dtype(DType t);
// The MPI op that combines `t` elements for `op` (Average uses the Sum op).
MPI_Op mpi_reduce_op(DType t, ReduceOp op);

}  // namespace kolo::ops

// core/join.h — what a rank that has joined (kolo::join()) executes for the collectives the
// other ranks still submit: stand-in tensors, since it submitted none of its own.
//
// Rank 0 lists such ranks in Response::joined (core/negotiation.h). On a listed rank the
// coordinator runs the response on stand-ins instead of the queue's entries: the op's
// identity for allreduce (kernels/cpu_reduce.h: fill_identity), a buffer that receives and
// discards the root's data for broadcast, no rows for allgather. Their handles are private
// and never reach a user. CPU only: rank 0 fails GPU collectives that have joined ranks.
//
// Thread safety: plain functions on the coordinator's buffers.
#pragma once

#include <cstddef>
#include <vector>

#include "core/message.h"
#include "core/tensor_queue.h"

namespace kolo {

// Whether `rank` is one of `r`'s joined ranks.
bool joined_in(const Response& r, int rank);

// Fills *out with one stand-in entry per name of `r` (none for an error response), viewing
// memory in *scratch, which must stay untouched until the entries are done with.
void stand_in_entries(const Response& r, std::vector<TensorEntry>* out, std::vector<std::byte>* scratch);

}  // namespace kolo

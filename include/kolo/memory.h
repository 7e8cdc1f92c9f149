// kolo/memory.h — memory inside kolo's shared segment, for zero-copy allreduce.
//
// A CPU tensor that lives in memory from allocate_shared() is reduced in place: the ranks of
// a host read each other's buffers directly, so an allreduce makes no copy into or out of
// kolo's own buffers (docs/shm.md, "Zero copy"). A model that keeps all its gradients in one
// contiguous buffer (nn::ParamStore, or llm.c style) allocates that buffer here once;
// kolo::DistributedOptimizer does it for you with DistributedOptions::shared_gradients.
//
// Capacity: KOLO_SHM_ARENA_BYTES (per rank, e.g. 256M; default 0 = none) is reserved in
// /dev/shm when init() runs — a host needs that much free there per local rank, or init()
// falls back to MPI (KOLO_CPU_OPERATIONS=auto) or fails (=shm). Memory is never returned one
// allocation at a time; all of it goes at shutdown().
//
// Rules:
//   * Every rank must make the same allocations (same sizes, same order). Tensors of one
//     collective then lie at the same offsets on every rank, which the zero-copy path
//     requires. A rank whose tensor is in shared memory while a peer's is not (or lies
//     elsewhere) makes that collective fail on every rank with a mismatch error, never hang.
//   * Peers on the same host can read this memory. Keep only what is reduced here.
//   * The memory is ordinary memory for the program's threads, but like any tensor handed
//     to kolo it must not be touched between allreduce_async() and the handle's completion.
//   * Valid from allocate_shared() until shutdown(). After shutdown() the pages are unmapped:
//     touching them is undefined behaviour (in practice a crash). Destroy or stop using
//     whatever lives there before shutting down.
//   * Where the shared-memory executor is not in use (several hosts are fine; MPI-only
//     builds, KOLO_CPU_OPERATIONS=mpi or a failed set-up are not), allocate_shared() throws
//     and shared_memory_available() returns 0: check it and keep a private buffer instead.
//
// Thread safety: allocate_shared() and the queries may be called from any thread between
// init() and shutdown(); calls are serialised internally. The allocation order must still
// be the same on every rank, so allocate from one thread (typically before training).
#pragma once

#include <cstddef>

namespace kolo {

// `bytes` of shared memory, 64-byte aligned, contents zero on first use. Throws kolo::Error
// when kolo is not initialised, has no shared memory (the message says which knob to set),
// or when fewer than `bytes` are left (the message gives the capacity and what is left).
void* allocate_shared(size_t bytes);

// Typed form: `count` elements of T (trivially copyable types only; no constructor runs).
template <class T>
T* allocate_shared_array(size_t count) {
  return static_cast<T*>(allocate_shared(count * sizeof(T)));
}

// Bytes allocate_shared() can still hand out on this rank (0 without shared memory).
size_t shared_memory_available();
// This rank's capacity (KOLO_SHM_ARENA_BYTES rounded up to 4 KiB; 0 without shared memory).
size_t shared_memory_capacity();

}  // namespace kolo

// kolo/memory.h — memory inside kolo's shared segment, for zero-copy allreduce.
//
// A CPU tensor that lives in memory from allocate_shared() is reduced in place: the ranks of
// a host read each other's buffers directly, so an allreduce makes no copy into or out of
// kolo's own buffers (docs/shm.md, "Zero copy"). A model that keeps all its gradients in one
// contiguous buffer (nn::ParamStore, or llm.c style) allocates that buffer here once;
// kolo::DistributedOptimizer does it for you with DistributedOptions::shared_gradients.
//
// Capacity: KOLO_SHM_ARENA_BYTES per rank. Default `auto`: when every rank of the job is on
// one host and there are at least two, min(2 GiB, size of /dev/shm / local ranks); none
// otherwise (nothing to share with, or several hosts, where zero copy does not apply) or
// when it cannot be set up (then init() carries on without it). An explicit byte count is
// made on any topology, and init() falls back to MPI (KOLO_CPU_OPERATIONS=auto) or fails
// (=shm) if it cannot be. `0`: none. Either way the arena is only reserved at init(), not
// backed: allocate_shared() commits the pages it hands out in /dev/shm, and throws
// (naming /dev/shm, the bytes and the errno text) when /dev/shm cannot back them — never a
// SIGBUS later. Memory is never returned one allocation at a time (but see
// release_shared); all of it goes at shutdown().
//
// Rules:
//   * Every rank must make the same allocations (same sizes, same order). Tensors of one
//     collective then lie at the same offsets on every rank, which the zero-copy path
//     requires. A rank whose tensor is in shared memory while a peer's is not (or lies
//     elsewhere) makes that collective fail on every rank with a mismatch error, never hang.
//   * The ranks of a host share /dev/shm, so an allocation can fail on one rank and succeed
//     on another. allocate_shared_everywhere() makes it all or nothing (DistributedOptimizer
//     uses it); with allocate_shared() agree yourself and release_shared() where it
//     succeeded, so the next allocations lie at the same offsets again.
//   * Peers on the same host can read this memory. Keep only what is reduced here.
//   * The memory is ordinary memory for the program's threads, but like any tensor handed
//     to kolo it must not be touched between allreduce_async() and the handle's completion.
//   * Valid from allocate_shared() until shutdown(). After shutdown() the pages are unmapped:
//     touching them is undefined behaviour (in practice a crash). Destroy or stop using
//     whatever lives there before shutting down.
//   * Where there is no arena (KOLO_SHM_ARENA_BYTES=0; `auto` with one rank, several hosts
//     or a /dev/shm that cannot hold it; KOLO_CPU_OPERATIONS=mpi, MPI-only builds, a failed
//     executor set-up), allocate_shared() throws and shared_memory_capacity() and
//     shared_memory_available() return 0: check it and keep a private buffer instead.
//
// Thread safety: allocate_shared() and the queries may be called from any thread between
// init() and shutdown(); calls are serialised internally. The allocation order must still
// be the same on every rank, so allocate from one thread (typically before training).
#pragma once

#include <cstddef>
#include <string>

namespace kolo {

// `bytes` of shared memory, 64-byte aligned, committed, contents zero on first use. Throws
// kolo::Error (and takes nothing) when kolo is not initialised, has no shared memory (the
// message says why and which knob to set), when fewer than `bytes` are left (the message
// gives the capacity and what is left), or when /dev/shm cannot back them (the message
// names /dev/shm, the bytes and the errno text, e.g. "No space left on device").
void* allocate_shared(size_t bytes);

// Gives back `p` if it is this rank's latest allocation (not yet released): the next
// allocation starts where `p` did, its whole pages return to /dev/shm, and the memory reads
// zero again. Returns false and does nothing otherwise (one step of undo only).
bool release_shared(void* p);

// allocate_shared on every rank at once, all or nothing: either every rank gets its `bytes`
// or none keeps any (the ranks that allocated give it back with release_shared) and this
// returns nullptr with *why (if given) saying why. Collective (one small allreduce named
// `name`, unique among pending collectives) when the job has shared memory and more than one
// rank; without shared memory it returns nullptr on every rank without communicating.
// REQUIRES: kolo initialised; every rank calls it with the same `bytes` and `name`.
void* allocate_shared_everywhere(size_t bytes, const std::string& name, std::string* why = nullptr);

// Typed form: `count` elements of T (trivially copyable types only; no constructor runs).
template <class T>
T* allocate_shared_array(size_t count) {
  return static_cast<T*>(allocate_shared(count * sizeof(T)));
}

// Bytes of capacity allocate_shared() has not handed out on this rank (0 without shared
// memory). An allocation within it can still fail if /dev/shm fills up.
size_t shared_memory_available();
// This rank's capacity (KOLO_SHM_ARENA_BYTES rounded up to 4 KiB, or the `auto` size; 0
// without shared memory). Reserved, not backed: it may exceed what /dev/shm has free.
size_t shared_memory_capacity();

}  // namespace kolo

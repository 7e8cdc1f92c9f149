// kolo/memory.h over the ShmExecutor's arena: allocate_shared and its queries.
//
// The executor publishes its arena here when it is created (or why it has none) and
// withdraws it before the arena is destroyed (at shutdown); a mutex orders both against
// allocations from any thread.
#include <mutex>
#include <string>

#include "kolo/collectives.h"
#include "kolo/memory.h"
#include "kolo/runtime.h"
#include "kolo/status.h"
#include "ops/shm/shm_arena.h"

namespace kolo {
namespace {

const char* const kNoExecutor =
    "the shared-memory executor is not in use (KOLO_CPU_OPERATIONS=mpi, an MPI-only build, or its set-up failed)";

std::mutex& arena_mutex() {
  static std::mutex m;
  return m;
}
shm::ShmArena* g_arena = nullptr;  // guarded by arena_mutex()
std::string& no_arena_reason() {   // guarded by arena_mutex()
  static std::string r = kNoExecutor;
  return r;
}

}  // namespace

namespace shm {
void publish_arena(ShmArena* arena, const std::string& why_none) {
  std::lock_guard<std::mutex> lock(arena_mutex());
  g_arena = arena;
  no_arena_reason() = why_none.empty() ? kNoExecutor : why_none;
}
}  // namespace shm

void* allocate_shared(size_t bytes) {
  std::lock_guard<std::mutex> lock(arena_mutex());
  if (g_arena == nullptr) {
    throw Error(Status::invalid_argument(
        is_initialized()
            ? "kolo::allocate_shared: no shared memory in this job: " + no_arena_reason() +
                  ". KOLO_SHM_ARENA_BYTES (per rank, e.g. 256M) asks for it explicitly; keep the "
                  "shared-memory executor (KOLO_CPU_OPERATIONS auto or shm)"
            : "kolo::allocate_shared: kolo is not initialised (call kolo::init() first; memory from "
              "allocate_shared is valid until kolo::shutdown())"));
  }
  Status why;
  void* p = g_arena->allocate(bytes, &why);
  if (p != nullptr) return p;
  if (why.code() == Status::Code::kInvalidArgument) {  // capacity, not /dev/shm
    throw Error(Status::invalid_argument(
        "kolo::allocate_shared(" + std::to_string(bytes) + " bytes): only " +
        std::to_string(g_arena->available()) + " of the " + std::to_string(g_arena->bytes_per_rank()) +
        " bytes per rank are left (raise KOLO_SHM_ARENA_BYTES)"));
  }
  throw Error(Status::communication("kolo::allocate_shared(" + std::to_string(bytes) + " bytes): " + why.message()));
}

void* allocate_shared_everywhere(size_t bytes, const std::string& name, std::string* why) {
  std::string reason;
  void* p = nullptr;
  // Every rank has an arena or none has (ShmExecutor agrees at init), so all ranks take
  // this branch alike: without shared memory nothing is communicated.
  if (shared_memory_capacity() == 0) {
    reason = "no shared memory in this job";
  } else {
    try {
      p = allocate_shared(bytes);
    } catch (const Error& e) {
      reason = e.what();
    }
    if (size() > 1) {
      int32_t ok = p != nullptr ? 1 : 0;
      allreduce(TensorView::of(&ok, {1}), name, {ReduceOp::kMin});
      if (ok == 0 && p != nullptr) {
        release_shared(p);
        p = nullptr;
        reason = "another rank could not allocate them in shared memory";
      }
    }
  }
  if (p == nullptr && why != nullptr) *why = reason;
  return p;
}

bool release_shared(void* p) {
  std::lock_guard<std::mutex> lock(arena_mutex());
  return g_arena != nullptr && g_arena->release_last(p);
}

size_t shared_memory_available() {
  std::lock_guard<std::mutex> lock(arena_mutex());
  return g_arena == nullptr ? 0 : g_arena->available();
}

size_t shared_memory_capacity() {
  std::lock_guard<std::mutex> lock(arena_mutex());
  return g_arena == nullptr ? 0 : g_arena->bytes_per_rank();
}

}  // namespace kolo

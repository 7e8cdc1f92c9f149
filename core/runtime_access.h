// core/runtime_access.h — what the runtime's public entry points in other files (the
// process-set API, core/process_set_api.cc) need of the one process-wide runtime that
// core/runtime.cc owns.
//
// Ownership: the pointers are the runtime's, valid until kolo::shutdown().
// Thread safety: runtime_access() from any thread after init(); the registry and the queue
// are thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/process_set.h"
#include "core/tensor_queue.h"

namespace kolo::detail {

struct RuntimeAccess {
  ProcessSetRegistry* sets;
  TensorQueue* queue;
  int rank;
  int size;
};

// Throws kolo::Error if kolo is not initialised.
RuntimeAccess runtime_access();

// kolo::add_process_set, with `what` naming the caller in errors ("KOLO_PROCESS_SETS").
int32_t add_process_set_as(const std::vector<int>& ranks, const std::string& what);

}  // namespace kolo::detail

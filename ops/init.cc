// kolo::init() (kolo/runtime.h): the one place that chooses the backend the runtime is built
// on, above core/ (which names no transport): MPI (ops/mpi_backend.h). The lifecycle itself
// is core/runtime.cc.
#include "core/runtime_state.h"
#include "kolo/runtime.h"
#include "ops/mpi_backend.h"

namespace kolo {

void init() { init(nullptr, nullptr); }

void init(int* argc, char*** argv) { detail::init_runtime(argc, argv, create_mpi_backend); }

}  // namespace kolo

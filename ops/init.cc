// kolo::init() (kolo/runtime.h): the one place that chooses the backend the runtime is built
// on, above core/ (which names no transport): MPI (ops/mpi_backend.h), or Gloo with
// KOLO_BACKEND=gloo (ops/gloo_backend.h, docs/gloo.md). The lifecycle itself is core/runtime.cc.
#include "core/runtime_state.h"
#include "kolo/runtime.h"
#include "ops/gloo_backend.h"
#include "ops/mpi_backend.h"

namespace kolo {
namespace {

// The transport KOLO_BACKEND asks for: MPI unless Gloo (whose ranks need no argc/argv).
Status create_backend(const Config& config, int* argc, char*** argv, std::unique_ptr<Backend>* out) {
  if (config.transport == TransportKind::kGloo) return create_gloo_backend(config, out);
  return create_mpi_backend(config, argc, argv, out);
}

}  // namespace

void init() { init(nullptr, nullptr); }

void init(int* argc, char*** argv) { detail::init_runtime(argc, argv, create_backend); }

}  // namespace kolo

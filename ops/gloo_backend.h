// ops/gloo_backend.h — the Gloo backend (core/backend.h; KOLO_BACKEND=gloo, docs/gloo.md):
// the ranks meet through a Redis store and talk over Gloo's TCP transport; kolo makes no MPI
// call. kolo::init() builds it when the config asks for it (ops/init.cc).
#pragma once

#include <memory>

#include "core/backend.h"
#include "core/config.h"

namespace kolo {

// Meets the job's other ranks through the Redis store under "kolo/<job>/<generation>/" and
// builds the backend. Holds no process-wide state: a backend may be finalized and another
// created in the same process (the next generation; docs/gloo.md, "Re-forming"). Any thread;
// the backend is then used as core/backend.h says. In a build without Gloo
// (ops/gloo_absent.cc) it returns an error saying so.
Status create_gloo_backend(const Config& config, std::unique_ptr<Backend>* out);

}  // namespace kolo

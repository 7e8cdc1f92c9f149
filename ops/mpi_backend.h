// ops/mpi_backend.h — the MPI backend (core/backend.h): the job's topology from MPI, the
// control channel over MPI point-to-point messages, and the executors in order (shared
// memory, NCCL where built, MPI). The one backend kolo::init() builds (ops/init.cc).
#pragma once

#include <memory>

#include "core/backend.h"
#include "core/config.h"

namespace kolo {

// Initialises MPI if the program has not (with argc/argv, which may be null) and builds the
// backend for `config`. Called once, by kolo::init(), on the thread that calls it.
Status create_mpi_backend(const Config& config, int* argc, char*** argv, std::unique_ptr<Backend>* out);

}  // namespace kolo

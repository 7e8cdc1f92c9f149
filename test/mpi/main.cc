// Main of the multi-rank Catch2 suite: every rank runs the same tests in the same order;
// the process exits non-zero on every rank if any rank saw a failure.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cstdlib>
#include <cstring>

#include "kolo/kolo.h"

int main(int argc, char** argv) {
  // On the Gloo backend kolo makes no MPI call: the suite starts and ends MPI itself, for its
  // own agreements (this exit status, the tests' barriers).
  const char* backend = std::getenv("KOLO_BACKEND");
  const bool own_mpi = backend != nullptr && std::strcmp(backend, "gloo") == 0;
  if (own_mpi) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  }
  kolo::init(&argc, &argv);
  int failed = Catch::Session().run(argc, argv) != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (kolo::rank() == 0)
    std::printf("kolo mpi suite: %s on %d ranks\n", any_failed ? "FAILED" : "passed", kolo::size());
  kolo::shutdown();
  if (own_mpi) MPI_Finalize();
  return any_failed;
}

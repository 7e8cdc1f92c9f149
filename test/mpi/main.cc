// Main of the multi-rank Catch2 suite: every rank runs the same tests in the same order;
// the process exits non-zero on every rank if any rank saw a failure.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <mpi.h>

#include "kolo/kolo.h"

int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  int failed = Catch::Session().run(argc, argv) != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (kolo::rank() == 0)
    std::printf("kolo mpi suite: %s on %d ranks\n", any_failed ? "FAILED" : "passed", kolo::size());
  kolo::shutdown();
  return any_failed;
}

// Main of the multi-rank GPU suite (run under mpirun). Without a GPU every rank exits with
// kSkipExitCode before touching MPI, so mpirun, and CTest, report the run as skipped. With
// GPUs, rank r uses device local_rank % devices, kolo picks its GPU executor from
// KOLO_GPU_OPERATIONS, and the process fails on every rank if any rank saw a failure.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <mpi.h>

#include "kolo/kolo.h"
#include "test/gpu/gpu_test_util.h"

int main(int argc, char** argv) {
  const int gpus = kolo::test::visible_gpus();
  if (gpus == 0) {
    std::printf("no GPU found: skipping\n");
    return kolo::test::kSkipExitCode;
  }
  kolo::init(&argc, &argv);
  if (cudaSetDevice(kolo::local_rank() % gpus) != cudaSuccess) return 1;
  int failed = Catch::Session().run(argc, argv) != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (kolo::rank() == 0)
    std::printf("kolo gpu suite: %s on %d ranks\n", any_failed ? "FAILED" : "passed", kolo::size());
  kolo::shutdown();
  return any_failed;
}

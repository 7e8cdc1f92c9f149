// Main of the multi-rank trainer tests: every rank runs the same tests in the same order;
// every rank exits non-zero when any rank saw a failure.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "kolo/kolo.h"

int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  int32_t failed = Catch::Session().run(argc, argv) != 0 ? 1 : 0;
  kolo::allreduce(kolo::TensorView::of(&failed, {1}), "test.failed", {kolo::ReduceOp::kMax});
  if (kolo::rank() == 0) {
    std::printf("kolo trainer mpi suite: %s on %d ranks\n", failed ? "FAILED" : "passed", kolo::size());
  }
  kolo::shutdown();
  return failed;
}

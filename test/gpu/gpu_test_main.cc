// Main of the single-process GPU test binary. `--needs-gpu` (first argument, removed before
// Catch2 sees the rest) makes it exit with kSkipExitCode when no GPU is visible, so CTest
// reports the run as skipped; without it the selected tests run anywhere (they are the
// ones that need no device, e.g. "[host]").
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstring>

#include "test/gpu/gpu_test_util.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--needs-gpu") == 0) {
    if (kolo::test::visible_gpus() == 0) {
      std::printf("no GPU found: skipping\n");
      return kolo::test::kSkipExitCode;
    }
    argv[1] = argv[0];
    ++argv;
    --argc;
  }
  return Catch::Session().run(argc, argv);
}

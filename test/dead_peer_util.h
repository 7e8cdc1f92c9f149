// What the dead-peer test programs share: one clock for the whole host, and the victim's
// death (SIGKILL, reported first so that test/mpi/dead_peer_driver.py can time the others).
#pragma once

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>

#include "kolo/runtime.h"

namespace kolo::test {

inline double now_s() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

[[noreturn]] inline void die() {
  std::printf("VICTIM rank %d t=%.6f\n", kolo::rank(), now_s());
  std::fflush(stdout);
  kill(getpid(), SIGKILL);
  for (;;) pause();
}

}  // namespace kolo::test

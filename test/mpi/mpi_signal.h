// test/mpi/mpi_signal.h — ordering ranks in a test by a message instead of a sleep: a plain
// MPI message on MPI_COMM_WORLD (kolo's own traffic runs on its duplicated communicators, and
// kolo starts MPI with MPI_THREAD_MULTIPLE), waited for with a bound.
#pragma once

#include <catch2/catch.hpp>
#include <mpi.h>

#include <chrono>
#include <thread>

namespace kolo::test {

constexpr int kSignalTag = 7301;

// Tells rank `to` that this rank has reached the point it waits for (never blocks: eager).
inline void signal_rank(int to) {
  int one = 1;
  MPI_Send(&one, 1, MPI_INT, to, kSignalTag, MPI_COMM_WORLD);
}

// Waits for rank `from`'s signal, at most `seconds`; fails the test if none comes.
inline void await_signal(int from, int seconds = 60) {
  int value = 0, done = 0;
  MPI_Request r;
  MPI_Irecv(&value, 1, MPI_INT, from, kSignalTag, MPI_COMM_WORLD, &r);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!done && std::chrono::steady_clock::now() < until) {
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!done) {
    MPI_Cancel(&r);
    MPI_Request_free(&r);
  }
  REQUIRE(done);
}

}  // namespace kolo::test

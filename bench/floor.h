// bench/floor.h — what no allreduce on this machine can beat, measured in the same run as
// the figures it sits beside: the one-way latency of a cache line between two cores (a
// ping-pong through shared memory between local ranks 0 and 1) for small sizes, and the time
// one core takes to copy a buffer of the size (warm: in cache where it fits, memory
// bandwidth where it does not) for large ones; every rank copies at once, as in a collective.
#pragma once

#include <cstddef>

namespace kolo::bench {

struct Floor {
  double one_way_us = 0;  // one cache line from one core to another, median
};

// Collective over MPI_COMM_WORLD (every rank must call it). Local ranks 0 and 1 of each
// host ping-pong; without a second local rank one_way_us is 0. Rank 0's host's figure.
Floor measure_floor();

// Collective: the time (us, best of several, rank 0's) for every rank at once to copy
// `bytes` from one warm buffer to another: one read and one write of every byte, which each
// rank of an allreduce of private buffers must at least do.
double copy_us(size_t bytes);

}  // namespace kolo::bench

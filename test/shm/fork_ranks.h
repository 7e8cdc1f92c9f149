// test/shm/fork_ranks.h — runs N "local ranks" as fork()ed processes, without MPI, for the
// shared-memory engine's tests.
//
// Why not mpirun: Open MPI aborts the whole job when one rank dies, so "a rank is killed in
// the middle of a collective" can only be tested where the engine's own failure detection
// is the only thing watching. Here the parent process is the out-of-band channel: it serves
// ShmGroup::Agree over pipes, collects each child's verdict, and enforces a deadline (a
// child still running at the deadline is killed and reported, so a test cannot hang).
//
// Thread safety: call from the test's main thread only.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "ops/shm/shm_group.h"

namespace kolo::shm::testing {

// What one rank ran: its verdict ("" = passed, else what went wrong) and how it ended.
struct RankOutcome {
  bool reported = false;  // the child sent a verdict before exiting
  std::string verdict;
  bool killed = false;    // ended by a signal (the test may have meant that)
  int signal = 0;
};

// The body of one rank: returns "" on success, else a message. `agree` is the pipe-based
// Agree for ShmGroup::create.
using RankBody = std::function<std::string(int rank, const ShmGroup::Agree& agree)>;

// Forks `n` children running `body`; waits for all of them, at most `deadline`.
std::vector<RankOutcome> fork_ranks(int n, const RankBody& body,
                                    std::chrono::milliseconds deadline);

// A name no other test process uses: "/kolo-test-<pid>-<counter>".
std::string unique_segment_name();

// True when /dev/shm holds `name` (a POSIX shm name, with the leading "/").
bool segment_exists(const std::string& name);

// Joins the failing verdicts into one line for a test message ("" when all passed).
std::string failures(const std::vector<RankOutcome>& outcomes);

}  // namespace kolo::shm::testing

// test/shm/engine_test_util.h — what the fork()ed-rank engine tests (test_shm_engine.cc,
// test_shm_alltoall.cc) share: a deadline, small segment options, a group or a result pool
// made for one rank, and a check that every rank passed.
//
// Thread safety: call from the test's threads as the tests do (one rank per process).
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ops/shm/shm_group.h"
#include "ops/shm/shm_result_pool.h"
#include "test/shm/fork_ranks.h"

namespace kolo::shm::testing {

using std::chrono::milliseconds;
inline constexpr milliseconds kDeadline{60000};

// Small segments so that modest buffers already take many chunks.
inline ShmGroup::Options small_options(const std::string& name, int rank, int n) {
  ShmGroup::Options o;
  o.name = name;
  o.local_rank = rank;
  o.local_size = n;
  o.segment_bytes = 2 * static_cast<size_t>(n) * 8192;  // 8 KiB slots
  o.small_bytes = 1024;
  o.arena_chunk_bytes = 8192;  // zero copy: many pipelined chunks too
  o.peer_timeout = milliseconds(20000);
  return o;
}

// Creates a group for `rank` and runs `fn` on it; returns its verdict.
template <class F>
std::string with_group(const ShmGroup::Options& o, const ShmGroup::Agree& agree, F&& fn) {
  std::unique_ptr<ShmGroup> g;
  Status s = ShmGroup::create(o, agree, &g);
  if (!s.is_ok()) return "create: " + s.to_string();
  return fn(*g);
}

// A 1 MiB-per-rank result pool beside the group `name`; an empty string, or why not.
inline std::string make_pool(const std::string& name, int rank, int n, const ShmGroup::Agree& agree,
                             ShmResultPool** pool) {
  Status made = ShmResultPool::create({name + "-r", rank, n, 1u << 20}, agree, pool);
  return made.is_ok() ? std::string() : "pool: " + made.to_string();
}

inline void require_all_passed(const std::vector<RankOutcome>& out) {
  const std::string f = failures(out);
  INFO(f);
  REQUIRE(f.empty());
}

}  // namespace kolo::shm::testing

// Tests of the shared-memory engine's alltoallv and its result pool with fork()ed ranks (no
// MPI): every path (slots, single copy, pushes into pooled results, the one-step path through
// reserved blocks), the pool as tensor memory, and a mismatch beside a pooled alltoallv.
// Moved out of test_shm_engine.cc; the helpers both use are in engine_test_util.h.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/shm/shm_result_pool.h"
#include "test/shm/engine_test_util.h"
#include "test/shm/fork_ranks.h"
#include "test/shm/shm_test_data.h"

namespace kolo::shm::testing {

// Every alltoallv path: through the slots (8 KiB slots: many steps); single copy (each rank
// reads its blocks from the peers' inputs); results in a result pool (peers write into
// them); a pool with one rank's result private (it reads with process_vm_readv); and the
// same without cross-memory attach (that rank cannot get its blocks: all run the slots).
// Uneven blocks with empty ones.
TEST_CASE("shm alltoallv delivers every block, through the slots, in one copy and into pooled results",
          "[shm]") {
  const int n = 3;
  const auto N = static_cast<size_t>(n);
  // Byte matrices, m[s * n + d] from rank s to rank d.
  const std::vector<std::vector<size_t>> cases = {
      {0, 0, 0, 0, 0, 0, 0, 0, 0},
      {1, 7, 0, 3, 0, 9000, 20000, 5, 2},
      {40000, 0, 33333, 1, 70001, 0, 0, 65536, 12}};
  struct Mode {
    const char* what;
    size_t single_copy_min;
    bool pool;
    int private_rank;  // with a pool: this rank's result is private memory (-1: none)
  };
  const Mode modes[] = {{"slots", SIZE_MAX, false, -1},
                        {"single copy", 1, false, -1},
                        {"pool", SIZE_MAX, true, -1},
                        {"pool, rank 1 private", 1, true, 1},
                        {"pool, rank 1 private, no cross-memory attach", SIZE_MAX, true, 1}};
  for (const Mode& mode : modes) {
    const std::string name = unique_segment_name();
    const auto out = fork_ranks(n, [&](int rank, const ShmGroup::Agree& agree) {
      ShmGroup::Options o = small_options(name, rank, n);
      o.single_copy_min_bytes = mode.single_copy_min;
      o.pool_direct_min_bytes = 1;
      ShmResultPool* pool = nullptr;
      if (mode.pool) {
        Status s = ShmResultPool::create({name + "-r", rank, n, 1u << 20}, agree, &pool);
        if (!s.is_ok()) return "pool: " + s.to_string();
      }
      std::string verdict = with_group(o, agree, [&](ShmGroup& g) -> std::string {
        for (size_t c = 0; c < cases.size(); ++c) {
          const auto& m = cases[c];
          // Rank s's input: its blocks for ranks 0, 1, ... end to end, drawn from (c, s).
          auto input_of = [&](int s) {
            size_t total = 0;
            for (size_t d = 0; d < N; ++d) total += m[static_cast<size_t>(s) * N + d];
            return make_input(c, s, total, DType::kUInt8, ReduceOp::kSum);
          };
          std::vector<std::byte> want;
          for (int s = 0; s < n; ++s) {
            const auto theirs = input_of(s);
            size_t at = 0;
            for (int d = 0; d < rank; ++d) at += m[static_cast<size_t>(s) * N + static_cast<size_t>(d)];
            const size_t len = m[static_cast<size_t>(s) * N + static_cast<size_t>(rank)];
            want.insert(want.end(), theirs.begin() + static_cast<std::ptrdiff_t>(at),
                        theirs.begin() + static_cast<std::ptrdiff_t>(at + len));
          }
          const auto in = input_of(rank);
          std::vector<std::byte> got(want.size(), std::byte{0xee});
          std::byte* dst = got.data();
          if (pool != nullptr && rank != mode.private_rank && !want.empty()) {
            // Not filled: after a pooled call, peers may already be writing into the block
            // take() hands out (the reserved next result). Each case's bytes differ anyway.
            dst = static_cast<std::byte*>(pool->take(want.size()));
            if (dst == nullptr) return std::string("the pool gave no block");
          }
          Status s = g.alltoallv(in.data(), dst, m, pool);
          if (!s.is_ok()) return s.to_string();
          const bool same = std::equal(want.begin(), want.end(), dst);
          if (dst != got.data()) pool->give(dst);
          if (!same) return "alltoallv case " + std::to_string(c) + " differs";
        }
        return std::string();
      });
      if (pool != nullptr) {
        if (pool->live_blocks() != 0) verdict += " (blocks still out)";
        pool->retire();
      }
      return verdict;
    }, kDeadline);
    INFO(mode.what);
    require_all_passed(out);
  }
}

// The pool as tensor memory: first fit from the lowest offset (a freed block is handed out
// again), neighbours merged, blocks routed back from a Tensor's bytes, no room -> the heap,
// and a retired pool stays mapped until its last block comes back.
TEST_CASE("shm result pool hands out, takes back and merges blocks; tensors use it inside a scope",
          "[shm][pool]") {
  const std::string name = unique_segment_name();
  const auto out = fork_ranks(2, [&](int rank, const ShmGroup::Agree& agree) -> std::string {
    ShmResultPool* pool = nullptr;
    Status s = ShmResultPool::create({name, rank, 2, 64u << 10}, agree, &pool);  // 16 pages
    if (!s.is_ok()) return "create: " + s.to_string();
    char* a = static_cast<char*>(pool->take(5000));  // 2 pages
    char* b = static_cast<char*>(pool->take(4096));
    char* c = static_cast<char*>(pool->take(100));
    if (a != pool->region(rank) || b != a + 8192 || c != b + 4096) return std::string("not first fit");
    if (pool->offset_of(a + 100, 8092) != 100 || pool->offset_of(a + 100, 8093) != ShmResultPool::kNone)
      return std::string("offset_of ignores the block's end");
    if (pool->take(13 * 4096) != nullptr) return std::string("took more than is left");
    pool->give(b);
    pool->give(a);  // merges with b's pages: 3 pages at the start
    if (pool->offset_of(a, 1) != ShmResultPool::kNone) return std::string("a freed block still counts");
    char* d = static_cast<char*>(pool->take(3 * 4096));
    if (d != a) return std::string("freed neighbours were not merged");
    pool->give(d);
    pool->give(c);
    if (pool->live_blocks() != 0) return std::string("blocks still out");
    TensorBytes inside, outside;
    {
      kolo::detail::TensorSourceScope scope(pool);
      inside.resize(20000);
    }
    outside.resize(20000);
    if (!pool->holds(inside.data()) || pool->holds(outside.data()))
      return std::string("the scope does not decide where tensor memory comes from");
    {
      kolo::detail::TensorSourceScope scope(pool);
      TensorBytes too_big(1u << 20);  // no room: the heap serves it
      if (pool->holds(too_big.data())) return std::string("a block larger than the pool");
    }
    std::memset(inside.data(), 7, inside.size());
    pool->retire();
    if (pool->take(100) != nullptr) return std::string("a retired pool handed out memory");
    if (!pool->holds(inside.data()) || inside[19999] != std::byte{7})
      return std::string("retiring unmapped a block still in use");
    inside = TensorBytes();  // the last block: the pool unmaps now
    if (pool->holds(pool->region(rank))) return std::string("the pool is still mapped");
    return std::string();
  }, kDeadline);
  require_all_passed(out);
  REQUIRE_FALSE(segment_exists(name));
}

// The direct alltoallv pushes into each peer's result as soon as that peer has arrived; a
// peer that called something else must get nothing written and every rank a mismatch.
TEST_CASE("shm alltoallv into pooled results beside a rank calling allreduce: a mismatch on every rank",
          "[shm][failure]") {
  const int n = 3;
  const std::string name = unique_segment_name();
  const auto out = fork_ranks(n, [&](int rank, const ShmGroup::Agree& agree) {
    ShmGroup::Options o = small_options(name, rank, n);
    o.pool_direct_min_bytes = 1;
    ShmResultPool* pool = nullptr;
    if (std::string why = make_pool(name, rank, n, agree, &pool); !why.empty()) return why;
    std::string verdict = with_group(o, agree, [&](ShmGroup& g) -> std::string {
      const std::vector<size_t> m(static_cast<size_t>(n * n), 4096);
      std::vector<std::byte> in(4096 * static_cast<size_t>(n), std::byte{7});
      auto* dst = static_cast<std::byte*>(pool->take(in.size()));
      if (dst == nullptr) return std::string("the pool gave no block");
      std::fill(dst, dst + in.size(), std::byte{0xee});
      // Rank 2's result block lies in the pool too, so a push into it would be seen.
      Status s;
      if (rank == 2) {
        std::vector<float> buf(3000, 1.0f);
        s = g.allreduce(buf.data(), buf.size(), DType::kFloat32, ReduceOp::kSum);
      } else {
        s = g.alltoallv(in.data(), dst, m, pool);
      }
      const bool untouched = std::all_of(dst, dst + in.size(), [](std::byte b) { return b == std::byte{0xee}; });
      pool->give(dst);
      if (s.is_ok()) return std::string("the mismatched calls succeeded");
      if (s.message().find("alltoallv") == std::string::npos || s.message().find("allreduce") == std::string::npos)
        return "message lacks the two calls: " + s.to_string();
      if (rank == 2 && !untouched) return std::string("a peer wrote into the result of the rank that called allreduce");
      return std::string();
    });
    if (pool->live_blocks() != 0) verdict += " (blocks still out)";
    pool->retire();
    return verdict;
  }, kDeadline);
  require_all_passed(out);
}

// alltoallv's one-step path: the previous call's last step publishes each rank's next result
// block, reserved in the pool, and senders push into it before its owner has asked for it.
// A reserved block taken and given back without a group step (an executor that fails
// between allocating the result and alltoallv) must stay reserved: were it freed, a larger
// block allocated next would start in it (first fit), and the peers' pushes would land there.
TEST_CASE("shm alltoallv reserves each rank's next result; one given back unused stays reserved", "[shm][pool]") {
  const int n = 3;
  const auto N = static_cast<size_t>(n);
  const size_t block = 5000, total = block * N;
  const std::string name = unique_segment_name();
  const std::vector<size_t> m(N * N, block);
  auto byte_of = [](int call, int src, size_t i) { return static_cast<std::byte>((call * 31 + src * 7 + i) & 0xff); };
  const auto out = fork_ranks(n, [&](int rank, const ShmGroup::Agree& agree) {
    ShmResultPool* pool = nullptr;
    if (std::string why = make_pool(name, rank, n, agree, &pool); !why.empty()) return why;
    ShmGroup::Options o = small_options(name, rank, n);
    o.pool_direct_min_bytes = 1;  // blocks of 5000 bytes take the direct path
    std::string verdict = with_group(o, agree, [&](ShmGroup& g) -> std::string {
      // One call into `dst`; every byte checked.
      auto run = [&](int call, std::byte* dst) -> std::string {
        std::vector<std::byte> in(total);
        for (size_t i = 0; i < total; ++i) in[i] = byte_of(call, rank, i);
        // A pooled dst is not filled: peers may be writing into it already (each call's bytes differ).
        if (pool->offset_of(dst, total) == ShmResultPool::kNone) std::fill(dst, dst + total, std::byte{0xee});
        Status s = g.alltoallv(in.data(), dst, m, pool);
        if (!s.is_ok()) return "call " + std::to_string(call) + ": " + s.to_string();
        for (int src = 0; src < n; ++src)
          for (size_t j = 0; j < block; ++j)
            if (dst[static_cast<size_t>(src) * block + j] != byte_of(call, src, static_cast<size_t>(rank) * block + j))
              return "call " + std::to_string(call) + ": wrong byte from rank " + std::to_string(src);
        return std::string();
      };
      auto* kept = static_cast<std::byte*>(pool->take(total));  // a result the caller keeps
      std::string v = run(0, kept);
      if (!v.empty()) return v;
      bool taken = true;
      const size_t reserved = pool->reserved(&taken);
      if (reserved == ShmResultPool::kNone || taken) return std::string("no block reserved after a pooled call");
      std::byte* other = nullptr;  // rank 1: a larger block allocated after the reserved one went back
      const size_t other_bytes = 3 * total;
      if (rank == 1) {
        auto* x = static_cast<std::byte*>(pool->take(total));
        if (pool->offset_of(x, total) != reserved) return std::string("take() did not hand out the reserved block");
        pool->give(x);  // the executor failed before alltoallv: no group step
        if (pool->reserved(&taken) != reserved || taken) return std::string("the block given back is not reserved");
        other = static_cast<std::byte*>(pool->take(other_bytes));
        if (other == nullptr) return std::string("the pool gave no block");
        std::fill(other, other + other_bytes, std::byte{0x5a});
      }
      auto intact = [&] {
        return other == nullptr ||
               std::all_of(other, other + other_bytes, [](std::byte b) { return b == std::byte{0x5a}; });
      };
      auto* next = static_cast<std::byte*>(pool->take(total));  // the reserved block
      v = run(1, next);
      if (v.empty() && !intact()) v = "a push landed in a block that is not the reserved one";
      // Rank 1's result in private memory: its blocks arrive in its reserved block and are
      // copied out. Then every rank's, for two calls (one step each): each takes its reserved
      // block, offers a new one and copies out of the taken one, so its reservation moves on
      // every call (a two-step call would offer the same one again).
      std::vector<std::byte> mine(total);
      if (v.empty()) v = run(2, rank == 1 ? mine.data() : next);
      if (v.empty() && !intact()) v = "a push landed in a block that is not the reserved one (call 2)";
      for (int call = 3; call < 5 && v.empty(); ++call) {
        const size_t before = pool->reserved();
        v = run(call, mine.data());
        if (v.empty() && !intact()) v = "a push landed in a block that is not the reserved one (calls 3, 4)";
        const size_t after = pool->reserved(&taken);
        if (v.empty() && call == 4 && (after == ShmResultPool::kNone || taken || after == before))
          v = "call " + std::to_string(call) + ": a private result did not move its reservation on";
      }
      // A group step in between: the next call cannot use the published blocks.
      std::vector<std::byte> piece(64), all(64 * N);
      if (v.empty()) {
        Status s = g.allgatherv(piece.data(), all.data(), std::vector<size_t>(N, 64));
        if (!s.is_ok()) v = "allgatherv: " + s.to_string();
      }
      for (int call = 5; call < 8 && v.empty(); ++call) v = run(call, next);
      if (v.empty() && !intact()) v = "a push landed in a block that is not the reserved one (calls 5-7)";
      pool->give(next);
      pool->give(kept);
      if (other != nullptr) pool->give(other);
      return v;
    });
    if (pool->live_blocks() != 0) verdict += " (blocks still out)";
    pool->retire();
    return verdict;
  }, kDeadline);
  require_all_passed(out);
}

}  // namespace kolo::shm::testing

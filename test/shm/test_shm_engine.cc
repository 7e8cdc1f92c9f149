// Tests of the shared-memory engine with fork()ed ranks (no MPI): results against the
// rank-ordered reference, and every failure path — a dead peer, a late peer, mismatched
// calls, cleanup of the segment name. See fork_ranks.h for why these do not use mpirun.
// alltoallv and the result pool have their own file, test_shm_alltoall.cc.
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <algorithm>
#include <cstring>
#include <thread>
#include <tuple>
#include <vector>

#include "ops/shm/shm_arena.h"
#include "ops/shm/shm_kernels.h"
#include "ops/shm/shm_pieces.h"
#include "test/shm/engine_test_util.h"
#include "test/shm/fork_ranks.h"
#include "test/shm/shm_test_data.h"

namespace kolo::shm::testing {

TEST_CASE("shm pieces that follow each other in memory are visited as one run", "[shm]") {
  std::vector<float> a(20), b(8);
  // a[0,10) a[10,20) b[0,5) (empty) b[5,8): two runs, a's 20 elements and b's 8.
  const std::vector<Piece> pieces = {{a.data(), 10}, {a.data() + 10, 10}, {b.data(), 5}, {b.data() + 8, 0},
                                     {b.data() + 5, 3}};
  const detail::Pieces all(pieces, sizeof(float));
  REQUIRE(all.total() == 28);
  std::vector<std::tuple<char*, size_t, size_t>> calls;
  const auto note = [&](char* p, size_t done, size_t n) { calls.emplace_back(p, done, n); };
  all.for_range(0, 28, note);
  REQUIRE(calls == decltype(calls){{reinterpret_cast<char*>(a.data()), 0, 20}, {reinterpret_cast<char*>(b.data()), 20, 8}});
  calls.clear();
  all.for_range(15, 10, note);  // the end of a's run, then b's first 5
  REQUIRE(calls == decltype(calls){{reinterpret_cast<char*>(a.data() + 15), 0, 5}, {reinterpret_cast<char*>(b.data()), 5, 5}});
  calls.clear();
  // A piece listed before the one it follows in memory is not joined to it.
  const std::vector<Piece> reversed = {{a.data() + 10, 10}, {a.data(), 10}};
  detail::Pieces(reversed, sizeof(float)).for_range(5, 10, note);
  REQUIRE(calls == decltype(calls){{reinterpret_cast<char*>(a.data() + 15), 0, 5}, {reinterpret_cast<char*>(a.data()), 5, 5}});
}

TEST_CASE("shm copy_bytes copies every size and alignment exactly and writes nothing else", "[shm]") {
  // Sizes around the vector loop's steps (32, 128 bytes) and its hand-over to memcpy (1 MiB).
  const size_t sizes[] = {0, 1, 31, 32, 33, 127, 128, 129, 4096, 4099, 65536 + 17, (1u << 20) - 1, (1u << 20) + 5};
  std::vector<unsigned char> src((1u << 20) + 64), dst((1u << 20) + 128);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t n : sizes)
    for (size_t so : {0, 1, 16}) {
      for (size_t d : {0, 3, 32}) {
        std::fill(dst.begin(), dst.end(), 0xAB);
        copy_bytes(dst.data() + d, src.data() + so, n);
        INFO("bytes " << n << " src+" << so << " dst+" << d);
        REQUIRE(std::memcmp(dst.data() + d, src.data() + so, n) == 0);
        size_t touched = 0;  // bytes outside [d, d + n) that are no longer 0xAB
        for (size_t i = 0; i < dst.size(); ++i) touched += (i < d || i >= d + n) && dst[i] != 0xAB;
        REQUIRE(touched == 0);
      }
    }
  // scale_copy: f == 1 copies; otherwise ops::scale_copy's multiplication.
  std::vector<float> a(1000), b(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.5f;
  scale_copy(b.data(), a.data(), a.size(), DType::kFloat32, 1.0);
  REQUIRE(b == a);
  scale_copy(b.data(), a.data(), a.size(), DType::kFloat32, 0.25);
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(b[i] == a[i] * 0.25f);
}

TEST_CASE("shm allreduce equals the rank-ordered reference bitwise, every dtype and op",
          "[shm]") {
  for (int n : {2, 3, 4}) {
    const std::string name = unique_segment_name();
    const auto out = fork_ranks(n, [&](int rank, const ShmGroup::Agree& agree) {
      return with_group(small_options(name, rank, n), agree, [&](ShmGroup& g) -> std::string {
        uint64_t seed = 1;
        // 0, 1, odd, at the small-path limit, one slot, and many slots with a ragged end.
        for (size_t count : {0, 1, 7, 255, 256, 2048, 10007}) {
          for (DType t : kAllDTypes) {
            for (ReduceOp op : kAllOps) {
              std::string e = check_allreduce(g, ++seed, count, t, op, 1.0, 1.0);
              if (!e.empty()) return e;
            }
          }
        }
        return std::string();
      });
    }, kDeadline);
    INFO("local ranks: " << n);
    require_all_passed(out);
  }
}

TEST_CASE("shm allreduce applies prescale and postscale like the MPI path", "[shm]") {
  const std::string name = unique_segment_name();
  const auto out = fork_ranks(3, [&](int rank, const ShmGroup::Agree& agree) {
    return with_group(small_options(name, rank, 3), agree, [&](ShmGroup& g) -> std::string {
      uint64_t seed = 100;
      for (size_t count : {5, 9001}) {
        for (DType t : kAllDTypes) {
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
            for (auto [pre, post] : {std::pair{0.5, 1.0}, {1.0, 0.25}, {2.0, 3.0}}) {
              std::string e = check_allreduce(g, ++seed, count, t, op, pre, post);
              if (!e.empty()) return e;
            }
          }
        }
      }
      return std::string();
    });
  }, kDeadline);
  require_all_passed(out);
}

TEST_CASE("shm allreduce over many uneven pieces equals the reference", "[shm]") {
  const std::string name = unique_segment_name();
  const auto out = fork_ranks(2, [&](int rank, const ShmGroup::Agree& agree) {
    return with_group(small_options(name, rank, 2), agree, [&](ShmGroup& g) -> std::string {
      uint64_t seed = 200;
      for (int pieces : {2, 17, 161}) {
        for (size_t count : {100, 4099, 30011}) {
          for (DType t : {DType::kFloat32, DType::kInt32, DType::kFloat16}) {
            std::string e = check_allreduce(g, ++seed, count, t, ReduceOp::kSum, 1.0, 1.0, pieces);
            if (e.empty()) e = check_allreduce(g, ++seed, count, t, ReduceOp::kMax, 2.0, 1.0, pieces);
            if (!e.empty()) return e;
          }
        }
      }
      return std::string();
    });
  }, kDeadline);
  require_all_passed(out);
}

TEST_CASE("shm broadcast from every root delivers the root's bytes", "[shm]") {
  const int n = 3;
  const std::string name = unique_segment_name();
  const auto out = fork_ranks(n, [&](int rank, const ShmGroup::Agree& agree) {
    return with_group(small_options(name, rank, n), agree, [&](ShmGroup& g) -> std::string {
      for (size_t bytes : {0, 1, 1001, 24576, 24577, 100003}) {  // around one half (3 x 8 KiB)
        for (int root = 0; root < n; ++root) {
          std::vector<std::byte> mine = make_input(bytes + root, rank, bytes, DType::kUInt8, ReduceOp::kSum);
          const std::vector<std::byte> want = make_input(bytes + root, root, bytes, DType::kUInt8, ReduceOp::kSum);
          Status s = g.broadcast(mine.data(), bytes, root);
          if (!s.is_ok()) return s.to_string();
          if (mine != want) return "broadcast of " + std::to_string(bytes) + " bytes from " + std::to_string(root) + " differs";
        }
      }
      return std::string();
    });
  }, kDeadline);
  require_all_passed(out);
}

TEST_CASE("shm allgatherv concatenates differing sizes, empty ones included", "[shm]") {
  const int n = 4;
  const std::string name = unique_segment_name();
  const auto out = fork_ranks(n, [&](int rank, const ShmGroup::Agree& agree) {
    return with_group(small_options(name, rank, n), agree, [&](ShmGroup& g) -> std::string {
      const std::vector<std::vector<size_t>> cases = {
          {0, 0, 0, 0}, {1, 2, 3, 4}, {0, 8192, 1, 20000}, {50000, 0, 7, 8193}};
      for (size_t c = 0; c < cases.size(); ++c) {
        const auto& sizes = cases[c];
        std::vector<std::byte> want;
        for (int j = 0; j < n; ++j) {
          auto part = make_input(c, j, sizes[j], DType::kUInt8, ReduceOp::kSum);
          want.insert(want.end(), part.begin(), part.end());
        }
        const auto in = make_input(c, rank, sizes[rank], DType::kUInt8, ReduceOp::kSum);
        std::vector<std::byte> got(want.size(), std::byte{0xee});
        Status s = g.allgatherv(in.data(), got.data(), sizes);
        if (!s.is_ok()) return s.to_string();
        if (got != want) return "allgatherv case " + std::to_string(c) + " differs";
      }
      return std::string();
    });
  }, kDeadline);
  require_all_passed(out);
}



TEST_CASE("shm reduce_to_leader gives local rank 0 the sum and leaves the others unchanged",
          "[shm]") {
  const int n = 3;
  const std::string name = unique_segment_name();
  const auto out = fork_ranks(n, [&](int rank, const ShmGroup::Agree& agree) {
    return with_group(small_options(name, rank, n), agree, [&](ShmGroup& g) -> std::string {
      for (size_t count : {3, 200, 20000}) {
        for (double pre : {1.0, 0.5}) {
          const uint64_t seed = count;
          auto buf = make_input(seed, rank, count, DType::kFloat32, ReduceOp::kAverage);
          const auto before = buf;
          Status s = g.reduce_to_leader(buf.data(), count, DType::kFloat32, ReduceOp::kAverage, pre);
          if (!s.is_ok()) return s.to_string();
          // Leader: the combination without the division by n (that is the caller's step).
          const auto want = rank == 0 ? reference_allreduce(seed, n, count, DType::kFloat32, ReduceOp::kSum, pre, 1.0)
                                      : before;
          const std::string d = first_difference(buf, want, DType::kFloat32);
          if (!d.empty()) return "count " + std::to_string(count) + ": " + d;
        }
      }
      return std::string();
    });
  }, kDeadline);
  require_all_passed(out);
}

TEST_CASE("shm segment name is gone once every rank has mapped it, and after exit", "[shm]") {
  const std::string name = unique_segment_name();
  const auto out = fork_ranks(2, [&](int rank, const ShmGroup::Agree& agree) {
    return with_group(small_options(name, rank, 2), agree, [&](ShmGroup& g) -> std::string {
      if (segment_exists(name)) return "/dev/shm" + name + " still exists after create()";
      float x = 1.0f;  // and the unlinked segment still works
      Status s = g.allreduce(&x, 1, DType::kFloat32, ReduceOp::kSum);
      if (!s.is_ok() || x != 2.0f) return "allreduce after unlink: " + s.to_string();
      (void)rank;
      return std::string();
    });
  }, kDeadline);
  require_all_passed(out);
  REQUIRE_FALSE(segment_exists(name));
}

TEST_CASE("shm ranks that disagree on the options all fail create() and leave no name",
          "[shm]") {
  const std::string name = unique_segment_name();
  const auto out = fork_ranks(3, [&](int rank, const ShmGroup::Agree& agree) {
    ShmGroup::Options o = small_options(name, rank, 3);
    if (rank == 2) o.segment_bytes *= 2;
    std::unique_ptr<ShmGroup> g;
    Status s = ShmGroup::create(o, agree, &g);
    if (s.is_ok()) return std::string("create() succeeded with mismatched options");
    if (rank == 2 && s.message().find("expected") == std::string::npos) return "unclear error: " + s.to_string();
    return std::string();
  }, kDeadline);
  require_all_passed(out);
  REQUIRE_FALSE(segment_exists(name));
}

TEST_CASE("shm segment larger than /dev/shm: every rank fails create() with a clear message",
          "[shm][failure]") {
  const std::string name = unique_segment_name();
  const auto out = fork_ranks(2, [&](int rank, const ShmGroup::Agree& agree) {
    ShmGroup::Options o = small_options(name, rank, 2);
    o.segment_bytes = size_t{1} << 40;  // 1 TiB: tmpfs refuses the reservation up front
    std::unique_ptr<ShmGroup> g;
    Status s = ShmGroup::create(o, agree, &g);
    if (s.is_ok()) return std::string("create() succeeded with a 1 TiB segment");
    if (rank == 0 && s.message().find("/dev/shm") == std::string::npos) return "unclear error: " + s.to_string();
    return std::string();
  }, kDeadline);
  require_all_passed(out);
  REQUIRE_FALSE(segment_exists(name));
}

TEST_CASE("shm rank killed mid-collective: the others fail naming it, in bounded time",
          "[shm][failure]") {
  const int n = 3;
  const int victim = 1;
  const std::string name = unique_segment_name();
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = fork_ranks(n, [&](int rank, const ShmGroup::Agree& agree) {
    ShmGroup::Options o = small_options(name, rank, n);
    o.segment_bytes = 2 * n * (256u << 10);
    o.peer_timeout = milliseconds(30000);  // detection must come from the liveness check
    return with_group(o, agree, [&](ShmGroup& g) -> std::string {
      if (rank == victim) {  // dies at some point inside one of its allreduces
        std::thread([] {
          std::this_thread::sleep_for(milliseconds(150));
          kill(getpid(), SIGKILL);
        }).detach();
      }
      std::vector<float> buf(4u << 20, 1.0f);
      for (int it = 0; it < 100000; ++it) {
        Status s = g.allreduce(buf.data(), buf.size(), DType::kFloat32, ReduceOp::kSum);
        if (s.is_ok()) continue;
        const auto failed_at = std::chrono::steady_clock::now();
        // The next call must fail at once with the same sticky error.
        Status again = g.allreduce(buf.data(), 1, DType::kFloat32, ReduceOp::kSum);
        const bool quick = std::chrono::steady_clock::now() - failed_at < milliseconds(2000);  // not 30 s
        const bool names = s.message().find("local rank " + std::to_string(victim)) != std::string::npos;
        if (s.code() != Status::Code::kAborted || !names) return "unexpected error: " + s.to_string();
        if (again.is_ok() || !quick) return "group not broken after a failure";
        return std::string();
      }
      return std::string("never noticed that the victim died");
    });
  }, milliseconds(20000));
  // The victim dies ~150 ms in; liveness is probed every 10 ms: seconds are plenty, even on
  // a loaded machine, and far below the 30 s peer timeout.
  REQUIRE(std::chrono::steady_clock::now() - t0 < milliseconds(8000));
  REQUIRE(out[victim].killed);
  REQUIRE(out[victim].signal == SIGKILL);
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    INFO("rank " << r << ": " << out[r].verdict);
    REQUIRE(out[r].reported);
    REQUIRE(out[r].verdict.empty());
  }
  REQUIRE_FALSE(segment_exists(name));
}

TEST_CASE("shm peer that never arrives: a timeout naming it", "[shm][failure]") {
  const std::string name = unique_segment_name();
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = fork_ranks(2, [&](int rank, const ShmGroup::Agree& agree) {
    ShmGroup::Options o = small_options(name, rank, 2);
    o.peer_timeout = milliseconds(300);
    return with_group(o, agree, [&](ShmGroup& g) -> std::string {
      if (rank == 1) {  // alive but absent, then leaves without calling
        std::this_thread::sleep_for(milliseconds(1500));
        return std::string();
      }
      double x = 1;
      Status s = g.allreduce(&x, 1, DType::kFloat64, ReduceOp::kSum);
      if (s.code() != Status::Code::kTimeout) return "expected a timeout, got " + s.to_string();
      if (s.message().find("local rank 1") == std::string::npos) return "does not name the peer: " + s.to_string();
      return std::string();
    });
  }, kDeadline);
  require_all_passed(out);
  REQUIRE(std::chrono::steady_clock::now() - t0 < milliseconds(10000));
}

TEST_CASE("shm peer late past the yield phase: the waiters sleep on its step word and go on exactly",
          "[shm]") {
  // Each call one rank arrives 5 ms late, past the 2 ms of yielding: the others sleep on its
  // step word (a futex its arrival wakes, PeerSync::wait_slow), several of them at once.
  const int n = 3;
  const std::string name = unique_segment_name();
  const auto out = fork_ranks(n, [&](int rank, const ShmGroup::Agree& agree) {
    ShmGroup::Options o = small_options(name, rank, n);
    o.peer_timeout = milliseconds(30000);
    return with_group(o, agree, [&](ShmGroup& g) -> std::string {
      std::vector<int32_t> buf(1000);
      for (int it = 0; it < 12; ++it) {
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = rank * 1000 + it + static_cast<int32_t>(i);
        if (rank == it % n) std::this_thread::sleep_for(milliseconds(5));
        Status s = g.allreduce(buf.data(), buf.size(), DType::kInt32, ReduceOp::kSum);
        if (!s.is_ok()) return "call " + std::to_string(it) + ": " + s.to_string();
        for (size_t i = 0; i < buf.size(); ++i) {
          const int32_t want = 3000 + n * (it + static_cast<int32_t>(i));
          if (buf[i] != want) {
            return "call " + std::to_string(it) + " element " + std::to_string(i) + ": " +
                   std::to_string(buf[i]) + ", expected " + std::to_string(want);
          }
        }
      }
      return std::string();
    });
  }, kDeadline);
  require_all_passed(out);
}

TEST_CASE("shm peer that destroys its group while others wait: they fail at once, naming it",
          "[shm][failure]") {
  const std::string name = unique_segment_name();
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = fork_ranks(3, [&](int rank, const ShmGroup::Agree& agree) {
    ShmGroup::Options o = small_options(name, rank, 3);
    o.peer_timeout = milliseconds(30000);
    const std::string verdict = with_group(o, agree, [&](ShmGroup& g) -> std::string {
      if (rank == 2) return std::string();  // destroys its group without calling
      int32_t x = 1;
      Status s = g.allreduce(&x, 1, DType::kInt32, ReduceOp::kSum);
      if (s.code() != Status::Code::kAborted || s.message().find("local rank 2 shut its group down") == std::string::npos) {
        return "expected an abort naming local rank 2, got " + s.to_string();
      }
      return std::string();
    });
    if (rank == 2) std::this_thread::sleep_for(milliseconds(1500));  // alive, just gone from the group
    return verdict;
  }, kDeadline);
  require_all_passed(out);
  REQUIRE(std::chrono::steady_clock::now() - t0 < milliseconds(8000));
}

TEST_CASE("shm ranks calling different collectives get a mismatch naming both", "[shm][failure]") {
  const std::string name = unique_segment_name();
  const auto out = fork_ranks(2, [&](int rank, const ShmGroup::Agree& agree) {
    return with_group(small_options(name, rank, 2), agree, [&](ShmGroup& g) -> std::string {
      std::vector<float> buf(rank == 0 ? 100 : 200, 1.0f);
      Status s = g.allreduce(buf.data(), buf.size(), DType::kFloat32, ReduceOp::kSum);
      if (s.is_ok()) return std::string("mismatched allreduce succeeded");
      // The rank that notices reports a mismatch; the other learns of it from the segment.
      const bool mentions = s.message().find("allreduce of 100 x float32") != std::string::npos &&
                            s.message().find("allreduce of 200 x float32") != std::string::npos;
      if (!mentions) return "message lacks the two calls: " + s.to_string();
      return std::string();
    });
  }, kDeadline);
  require_all_passed(out);
}


TEST_CASE("shm allreduce_in_arena (zero copy) equals the reference bitwise, pieces included",
          "[shm][arena]") {
  for (int n : {2, 3}) {
    const std::string name = unique_segment_name();
    const std::string arena_name = unique_segment_name();
    const auto out = fork_ranks(n, [&](int rank, const ShmGroup::Agree& agree) {
      return with_group(small_options(name, rank, n), agree, [&](ShmGroup& g) -> std::string {
        std::unique_ptr<ShmArena> arena;
        Status s = ShmArena::create({arena_name, rank, n, 1u << 20}, agree, &arena);
        if (!s.is_ok()) return "arena: " + s.to_string();
        if (segment_exists(arena_name)) return std::string("arena name left in /dev/shm");
        uint64_t seed = 700;
        for (DType t : kAllDTypes) {
          for (ReduceOp op : kAllOps) {
            for (size_t count : {0, 1, 999, 30011}) {
              arena->reset();
              const size_t es = dtype_size(t);
              const auto in = make_input(++seed, rank, count, t, op);
              // Three pieces as a model would allocate them (weights of unequal sizes).
              const size_t cuts[4] = {0, count / 5, count / 5 + count / 3, count};
              std::vector<Piece> pieces;
              for (int k = 0; k < 3; ++k) {
                const size_t m = cuts[k + 1] - cuts[k];
                void* p = arena->allocate(m * es);
                if (p == nullptr) return std::string("arena full");
                if (m > 0) std::memcpy(p, in.data() + cuts[k] * es, m * es);
                pieces.push_back({p, m});
              }
              const double pre = op == ReduceOp::kProduct ? 1.0 : 0.5;
              s = g.allreduce_in_arena(*arena, pieces, t, op, pre, 2.0);
              if (!s.is_ok()) return s.to_string();
              std::vector<std::byte> got;
              for (const Piece& p : pieces) {
                const auto* b = static_cast<const std::byte*>(p.data);
                got.insert(got.end(), b, b + p.count * es);
              }
              const std::string d = first_difference(got, reference_allreduce(seed, n, count, t, op, pre, 2.0), t);
              if (!d.empty()) {
                return std::string(dtype_name(t)) + " " + std::string(reduce_op_name(op)) + " count " +
                       std::to_string(count) + ": " + d;
              }
            }
          }
        }
        return std::string();
      });
    }, kDeadline);
    INFO("local ranks: " << n);
    require_all_passed(out);
  }
}

// Two forked ranks, each with a group (small_options) and a 64 KiB arena; fn(rank, group,
// arena) gives the rank's verdict.
template <class F>
void two_ranks_with_arena(F&& fn) {
  const std::string name = unique_segment_name();
  const std::string arena_name = unique_segment_name();
  const auto out = fork_ranks(2, [&](int rank, const ShmGroup::Agree& agree) {
    return with_group(small_options(name, rank, 2), agree, [&](ShmGroup& g) -> std::string {
      std::unique_ptr<ShmArena> arena;
      Status s = ShmArena::create({arena_name, rank, 2, 1u << 16}, agree, &arena);
      if (!s.is_ok()) return "arena: " + s.to_string();
      return fn(rank, g, *arena);
    });
  }, kDeadline);
  require_all_passed(out);
}

// A placement difference fails that call on every rank and leaves the group usable: the
// next allreduce (slot path, values 1 and 2) gives 3 everywhere.
std::string next_allreduce_works(ShmGroup& g, int rank) {
  std::vector<float> v(1000, static_cast<float>(rank + 1));
  const Status s = g.allreduce(v.data(), v.size(), DType::kFloat32, ReduceOp::kSum);
  if (!s.is_ok()) return "the allreduce after the mismatch failed: " + s.to_string();
  if (v[0] != 3.0f || v[999] != 3.0f) return "the allreduce after the mismatch gave " + std::to_string(v[0]);
  return std::string();
}

std::string placement_error(const Status& s) {
  if (s.code() != Status::Code::kMismatch || s.message() != kPlacementMismatch) {
    return "expected the placement mismatch, got " + s.to_string();
  }
  return std::string();
}

TEST_CASE("shm allreduce_in_arena with different layouts on two ranks fails that call only",
          "[shm][arena][failure]") {
  two_ranks_with_arena([](int rank, ShmGroup& g, ShmArena& arena) -> std::string {
    if (rank == 1) arena.allocate(64);  // rank 1's tensor sits one cache line later
    auto* p = static_cast<float*>(arena.allocate(100 * sizeof(float)));
    std::vector<float> outside(100);
    if (g.allreduce_in_arena(arena, std::vector<Piece>{{outside.data(), 100}}, DType::kFloat32, ReduceOp::kSum)
            .code() != Status::Code::kInvalidArgument) {
      return std::string("a buffer outside the arena was accepted");
    }
    const Status s = g.allreduce_in_arena(arena, std::vector<Piece>{{p, 100}}, DType::kFloat32, ReduceOp::kSum);
    if (s.is_ok()) return std::string("mismatched layouts were reduced");
    if (std::string e = placement_error(s); !e.empty()) return e;
    if (p[0] != 0.0f) return std::string("the failed call wrote into the tensor");
    return next_allreduce_works(g, rank);
  });
}

TEST_CASE("shm allreduce_in_arena on one rank and the slot path on another fails that call only",
          "[shm][arena][failure]") {
  two_ranks_with_arena([](int rank, ShmGroup& g, ShmArena& arena) -> std::string {
    auto* p = static_cast<float*>(arena.allocate(100 * sizeof(float)));
    std::vector<float> priv(100, 1.0f);
    const Status s = rank == 0
        ? g.allreduce_in_arena(arena, std::vector<Piece>{{p, 100}}, DType::kFloat32, ReduceOp::kSum)
        : g.allreduce(priv.data(), priv.size(), DType::kFloat32, ReduceOp::kSum);
    if (s.is_ok()) return std::string("a zero-copy and a slot allreduce were paired");
    if (std::string e = placement_error(s); !e.empty()) return e;
    if (priv[0] != 1.0f) return std::string("the failed call wrote into the private tensor");
    // Both in the arena now: the zero-copy path works again (values 1 and 2 -> 3).
    for (int i = 0; i < 100; ++i) p[i] = static_cast<float>(rank + 1);
    const Status z = g.allreduce_in_arena(arena, std::vector<Piece>{{p, 100}}, DType::kFloat32, ReduceOp::kSum);
    if (!z.is_ok() || p[99] != 3.0f) return "zero copy after the mismatch: " + z.to_string();
    return next_allreduce_works(g, rank);
  });
}

// The size of /dev/shm (0 when unknown).
size_t dev_shm_bytes() {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) != 0) return 0;
  return static_cast<size_t>(fs.f_blocks) * fs.f_frsize;
}

TEST_CASE("shm arena is reserved lazily: larger than /dev/shm, committed as allocated, clean ENOSPC",
          "[shm][arena][failure]") {
  const size_t fs_bytes = dev_shm_bytes();
  if (fs_bytes == 0 || fs_bytes > (size_t{1} << 40)) return;  // no bounded tmpfs to exceed
  // Each rank's region alone is larger than /dev/shm: an eager reservation could not exist.
  const size_t region = fs_bytes + (size_t{1} << 30);
  const std::string name = unique_segment_name();
  const auto out = fork_ranks(2, [&](int rank, const ShmGroup::Agree& agree) -> std::string {
    std::unique_ptr<ShmArena> arena;
    Status s = ShmArena::create({name, rank, 2, region}, agree, &arena);
    if (!s.is_ok()) return "create: " + s.to_string();
    auto* a = static_cast<unsigned char*>(arena->allocate(100000));
    if (a == nullptr) return std::string("a small allocation failed");
    for (size_t i = 0; i < 100000; i += 997) {
      if (a[i] != 0) return std::string("fresh memory is not zero");
    }
    std::memset(a, 0xab, 100000);
    // More than the whole filesystem: tmpfs refuses it up front, taking no memory.
    const size_t before = arena->available();
    const size_t big = fs_bytes + 4096;
    Status why;
    if (arena->allocate(big, &why) != nullptr) return std::string("an allocation larger than /dev/shm succeeded");
    const std::string m = why.message();
    if (m.find("/dev/shm") == std::string::npos || m.find(std::to_string(big)) == std::string::npos ||
        m.find(std::strerror(ENOSPC)) == std::string::npos) {
      return "unclear error: " + why.to_string();
    }
    if (arena->available() != before) return std::string("a failed allocation took capacity");
    // An injected failure (one rank only, as a shared /dev/shm can do): same clean path.
    if (rank == 1) {
      SharedMapping::fail_commits_for_test(ENOSPC);
      void* p = arena->allocate(1u << 20, &why);
      SharedMapping::fail_commits_for_test(0);
      if (p != nullptr || why.message().find(std::strerror(ENOSPC)) == std::string::npos) {
        return "injected failure not reported: " + why.to_string();
      }
    }
    // release_last: the next allocation starts at the same place and reads zero again.
    if (arena->release_last(a + 64)) return std::string("released something that is not the latest allocation");
    if (!arena->release_last(a)) return std::string("could not release the latest allocation");
    auto* b = static_cast<unsigned char*>(arena->allocate(200000));
    if (b != a) return std::string("the allocation after a release moved");
    for (size_t i = 0; i < 200000; i += 331) {
      if (b[i] != 0) return std::string("released memory does not read zero");
    }
    return std::string();
  }, kDeadline);
  require_all_passed(out);
  REQUIRE_FALSE(segment_exists(name));
}

}  // namespace kolo::shm::testing

// The allreduce across hosts (ops/shm/shm_hierarchical.h), run under pretend hosts
// (KOLO_TEST_RANKS_PER_HOST) or simulated ones: sizes that leave slices and ring segments
// uneven or empty, buffers of more chunks than the pipeline holds at once, every op, the
// scales, fp16/bf16, and every rank holding bitwise the same result. On one host it runs the same
// checks through the shared-memory path.
#include <mpi.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

struct Case {
  std::string name;
  DType dtype;
  ReduceOp op;
  size_t count;
  double prescale = 1.0, postscale = 1.0;
};

// FNV-1a of the bytes: equal on every rank exactly when the results are bitwise equal
// (up to a collision).
uint64_t hash_bytes(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

void run(const std::vector<Case>& cases) {
  std::vector<Buffer> bufs;
  std::vector<Handle> handles;
  bufs.reserve(cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    bufs.emplace_back(c.dtype, c.count);
    for (size_t i = 0; i < c.count; ++i) bufs.back().put(i, input_value(k + 11, rank(), i, c.dtype, c.op));
    handles.push_back(allreduce_async(bufs.back().view(), c.name, {c.op, c.prescale, c.postscale}));
  }
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    INFO(c.name << " (" << c.count << " x " << dtype_name(c.dtype) << ", " << reduce_op_name(c.op) << ")");
    wait_ok(handles[k], 120);
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < c.count; ++i) {
      const double want = expected_allreduce(k + 11, size(), i, c.dtype, c.op, c.prescale, c.postscale);
      if (std::abs(bufs[k].at(i) - want) > tolerance(c.dtype, want) && wrong++ == 0) first = i;
    }
    INFO("first wrong element " << first << " of " << wrong);
    CHECK(wrong == 0);
    const unsigned long long mine = hash_bytes(bufs[k].view().data, c.count * dtype_size(c.dtype));
    unsigned long long lo = 0, hi = 0;
    MPI_Allreduce(&mine, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lo == hi);  // bitwise the same on every rank
  }
}

}  // namespace

TEST_CASE("cross-host: counts below, at and just past the slice and segment boundaries", "[cross-host]") {
  std::vector<Case> cases;
  int i = 0;
  // Fewer elements than ranks (empty slices and segments), odd counts, and counts just
  // around the chunk floor (512 KiB per local rank) and its multiples.
  for (size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{17}, size_t{1023}, size_t{262143},
                   size_t{262144}, size_t{262145}, size_t{393217}, size_t{524291}, size_t{1048583}}) {
    const DType t = (i % 3 == 0) ? DType::kFloat32 : (i % 3 == 1 ? DType::kInt32 : DType::kFloat64);
    const ReduceOp op = all_reduce_ops()[static_cast<size_t>(i) % all_reduce_ops().size()];
    // One at a time (blocking), so each is its own response and not fused with the others.
    Case c{"xh.edge." + std::to_string(n), t, op, n};
    run({c});
    ++i;
  }
}

TEST_CASE("cross-host: buffers of more chunks than the pipeline holds, every op, scales", "[cross-host]") {
  // Above 16 MiB a buffer takes more than 4 slot-sized chunks: the pipeline's staging
  // buffers are reused while earlier chunks are still between hosts.
  run({{"xh.big.f32.sum", DType::kFloat32, ReduceOp::kSum, 5000003},
       {"xh.big.f64.avg", DType::kFloat64, ReduceOp::kAverage, 2100001, 0.5, 3.0}});
  run({{"xh.big.i32.max", DType::kInt32, ReduceOp::kMax, 4194319},
       {"xh.big.i64.min", DType::kInt64, ReduceOp::kMin, 2097169}});
  run({{"xh.big.f32.prod", DType::kFloat32, ReduceOp::kProduct, 4194305},
       {"xh.big.i32.avg", DType::kInt32, ReduceOp::kAverage, 4194311, 2.0, 0.5}});
}

TEST_CASE("cross-host: many tensors fused into one response", "[cross-host]") {
  std::vector<Case> cases;
  for (int k = 0; k < 40; ++k)
    cases.push_back({"xh.fused." + std::to_string(k), k % 2 ? DType::kFloat32 : DType::kInt64,
                     k % 3 ? ReduceOp::kSum : ReduceOp::kAverage, static_cast<size_t>(1 + (k * 7919) % 60013)});
  run(cases);
}

TEST_CASE("cross-host: fp16/bf16 in float32 between hosts, several chunks, every op, scales", "[cross-host]") {
  // 16-bit values take the sliced path too (float32 from the host-local reduce to the
  // rounding): counts around the slices and past the pipeline's four chunks.
  run({{"xh.half.f16.sum.small", DType::kFloat16, ReduceOp::kSum, 7},
       {"xh.half.bf16.avg.small", DType::kBFloat16, ReduceOp::kAverage, 1029, 0.5, 2.0}});
  run({{"xh.half.f16.avg.big", DType::kFloat16, ReduceOp::kAverage, 9000011, 2.0, 0.25}});
  run({{"xh.half.bf16.max.big", DType::kBFloat16, ReduceOp::kMax, 4194319},
       {"xh.half.f16.min", DType::kFloat16, ReduceOp::kMin, 600001},
       {"xh.half.bf16.prod", DType::kBFloat16, ReduceOp::kProduct, 524291}});
}

// The program's own MPI on its main thread while kolo's cross-host collectives are pending
// (docs/correctness.md, "Known limits"): the main thread calls MPI_Allreduce over and over
// until every rank's handles are done, so MPI's progress engine runs on two threads at once
// while the ring's requests are in flight. Every result must be exact, and the loop is
// bounded (the ranks agree to stop after 120 s; wait_ok then fails).
TEST_CASE("cross-host: the program calls MPI on its own thread while collectives are pending", "[user-mpi]") {
  constexpr int kTensors = 8;
  constexpr size_t kCount = (1 << 20) + 3;  // several chunks across hosts
  for (int round = 0; round < 3; ++round) {
    std::vector<std::vector<float>> bufs(kTensors);
    std::vector<Handle> handles;
    for (int k = 0; k < kTensors; ++k) {
      bufs[k].assign(kCount, static_cast<float>(rank() + k + 1));
      handles.push_back(allreduce_async(TensorView::of(bufs[k]), "um." + std::to_string(round) + "." + std::to_string(k),
                                        {ReduceOp::kSum}));
    }
    const auto start = std::chrono::steady_clock::now();
    long calls = 0;
    for (;;) {
      int mine[2] = {1, 0};  // {all my handles done, my time is up}
      for (const Handle& h : handles) mine[0] &= h.done() ? 1 : 0;
      mine[1] = std::chrono::steady_clock::now() - start > std::chrono::seconds(120) ? 1 : 0;
      int all_done = 0, expired = 0;
      MPI_Allreduce(&mine[0], &all_done, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      MPI_Allreduce(&mine[1], &expired, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      ++calls;
      if (all_done || expired) break;
    }
    INFO("round " << round << ": " << calls << " pairs of MPI_Allreduce calls on the main thread");
    for (int k = 0; k < kTensors; ++k) {
      wait_ok(handles[k], 10);
      const float want = static_cast<float>(size() * (k + 1) + size() * (size() - 1) / 2);
      size_t wrong = 0;
      for (float x : bufs[k]) wrong += x != want ? 1 : 0;
      CHECK(wrong == 0);
    }
  }
}

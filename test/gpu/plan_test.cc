// The GPU plan (ops/gpu/gpu_plan.h): which executor every rank picks, from facts alone.
#include <catch2/catch.hpp>

#include "core/config.h"
#include "ops/gpu/gpu_plan.h"

using kolo::ops::gpu::GpuOperations;
using kolo::ops::gpu::GpuPlan;
using kolo::ops::gpu::plan_gpu;
using kolo::ops::gpu::RankGpuFacts;

namespace {

GpuPlan plan_ok(GpuOperations knob, const std::vector<RankGpuFacts>& ranks) {
  GpuPlan p;
  const kolo::Status s = plan_gpu(knob, ranks, &p);
  INFO(s.to_string());
  REQUIRE(s.is_ok());
  return p;
}

}  // namespace

TEST_CASE("KOLO_GPU_OPERATIONS parses auto, nccl, staged and names them when wrong", "[host]") {
  GpuOperations k = GpuOperations::kStaged;
  REQUIRE(kolo::ops::gpu::parse_gpu_operations(std::nullopt, &k).is_ok());
  CHECK(k == GpuOperations::kAuto);
  REQUIRE(kolo::ops::gpu::parse_gpu_operations(std::string("nccl"), &k).is_ok());
  CHECK(k == GpuOperations::kNccl);
  REQUIRE(kolo::ops::gpu::parse_gpu_operations(std::string("staged"), &k).is_ok());
  CHECK(k == GpuOperations::kStaged);
  const kolo::Status bad = kolo::ops::gpu::parse_gpu_operations(std::string("NCCL2"), &k);
  CHECK(bad.code() == kolo::Status::Code::kInvalidArgument);
  CHECK(bad.message() == "KOLO_GPU_OPERATIONS=\"NCCL2\" is not valid: expected one of auto, nccl, staged");
}

TEST_CASE("auto picks NCCL when every host has a GPU per rank", "[host]") {
  CHECK(plan_ok(GpuOperations::kAuto, {{1, 1}}).executor == GpuPlan::Executor::kNccl);
  CHECK(plan_ok(GpuOperations::kAuto, {{8, 4}, {8, 4}, {8, 4}, {8, 4}}).executor == GpuPlan::Executor::kNccl);
}

TEST_CASE("auto stages through the host when ranks must share a GPU", "[host]") {
  // Two ranks on a one-GPU host: NCCL would refuse them.
  CHECK(plan_ok(GpuOperations::kAuto, {{1, 2}, {1, 2}}).executor == GpuPlan::Executor::kStaged);
  // One crowded host is enough: every rank must run the same executor.
  CHECK(plan_ok(GpuOperations::kAuto, {{2, 2}, {2, 2}, {1, 2}, {1, 2}}).executor == GpuPlan::Executor::kStaged);
}

TEST_CASE("staged is honoured even where NCCL would work", "[host]") {
  CHECK(plan_ok(GpuOperations::kStaged, {{4, 1}}).executor == GpuPlan::Executor::kStaged);
}

TEST_CASE("nccl where ranks share a GPU is refused, naming the ranks", "[host]") {
  GpuPlan p;
  const kolo::Status s = plan_gpu(GpuOperations::kNccl, {{2, 2}, {2, 2}, {1, 2}, {1, 2}}, &p);
  CHECK(s.code() == kolo::Status::Code::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("rank(s) 2,3 share a host with more ranks than it has GPUs"));
}

TEST_CASE("a rank without a GPU disables GPU collectives everywhere, naming it", "[host]") {
  for (GpuOperations knob : {GpuOperations::kAuto, GpuOperations::kNccl, GpuOperations::kStaged}) {
    const GpuPlan p = plan_ok(knob, {{1, 1}, {0, 1}, {1, 1}});
    CHECK(p.executor == GpuPlan::Executor::kNone);
    CHECK(p.reason == "GPU collectives cannot run: rank(s) 1 of 3 see no CUDA device");
  }
}

TEST_CASE("KOLO_HIERARCHICAL_ALLREDUCE is 0 or 1, off by default, and named when wrong", "[host]") {
  auto parse = [](std::optional<std::string> v, kolo::Config* c) {
    return kolo::Config::parse(
        [&](const std::string& name) -> std::optional<std::string> {
          if (name == "KOLO_HIERARCHICAL_ALLREDUCE") return v;
          return std::nullopt;
        },
        c);
  };
  kolo::Config c;
  REQUIRE(parse(std::nullopt, &c).is_ok());
  CHECK_FALSE(c.hierarchical_allreduce);
  REQUIRE(parse(std::string("1"), &c).is_ok());
  CHECK(c.hierarchical_allreduce);
  const kolo::Status bad = parse(std::string("yes"), &c);
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.message(), Catch::Contains("KOLO_HIERARCHICAL_ALLREDUCE=\"yes\" is not valid: expected 0 or 1"));
}

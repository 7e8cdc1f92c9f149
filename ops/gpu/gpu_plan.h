// ops/gpu/gpu_plan.h — which GPU executor runs GPU collectives in this job, decided once at
// init from facts every rank has gathered (so every rank decides the same):
//   - how many CUDA devices each rank sees, and how many ranks share each rank's host;
//   - the knob KOLO_GPU_OPERATIONS = auto | nccl | staged (default auto).
// auto picks NCCL unless some host runs more ranks than it has GPUs (NCCL refuses two
// ranks on one GPU), then the host-staged executor. If any rank sees no GPU, no GPU
// executor runs, and GPU collectives fail on every rank with the plan's reason.
//
// Pure functions with no CUDA or MPI, so the decision is unit-tested without a GPU.
// Thread safety: values and pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::ops::gpu {

enum class GpuOperations { kAuto, kNccl, kStaged };

// Parses KOLO_GPU_OPERATIONS (absent = auto); an unknown value names the accepted ones.
Status parse_gpu_operations(const std::optional<std::string>& value, GpuOperations* out);

// What one rank contributes to the decision.
struct RankGpuFacts {
  int device_count = 0;  // <= 0: CUDA unusable on this rank
  int local_size = 1;    // ranks on this rank's host
};

struct GpuPlan {
  enum class Executor { kNone, kNccl, kStaged };
  Executor executor = Executor::kNone;
  // kNone: why GPU collectives cannot run, e.g. "rank(s) 1,3 see no CUDA device".
  std::string reason;
};

// Decides from every rank's facts (indexed by rank). An explicit `nccl` that cannot work
// (ranks sharing a GPU) is an error, so that init() refuses rather than NCCL failing later.
Status plan_gpu(GpuOperations knob, const std::vector<RankGpuFacts>& ranks, GpuPlan* out);

}  // namespace kolo::ops::gpu

#include "ops/gpu/gpu_plan.h"

namespace kolo::ops::gpu {
namespace {

std::string join_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) {
    if (!s.empty()) s += ',';
    s += std::to_string(r);
  }
  return s;
}

}  // namespace

Status parse_gpu_operations(const std::optional<std::string>& value, GpuOperations* out) {
  if (!value || *value == "auto") *out = GpuOperations::kAuto;
  else if (*value == "nccl") *out = GpuOperations::kNccl;
  else if (*value == "staged") *out = GpuOperations::kStaged;
  else
    return Status::invalid_argument("KOLO_GPU_OPERATIONS=\"" + *value +
                                    "\" is not valid: expected one of auto, nccl, staged");
  return Status::ok();
}

Status plan_gpu(GpuOperations knob, const std::vector<RankGpuFacts>& ranks, GpuPlan* out) {
  std::vector<int> no_gpu, crowded;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].device_count <= 0) no_gpu.push_back(static_cast<int>(r));
    else if (ranks[r].local_size > ranks[r].device_count) crowded.push_back(static_cast<int>(r));
  }
  *out = GpuPlan{};
  if (!no_gpu.empty()) {
    out->reason = "GPU collectives cannot run: rank(s) " + join_ranks(no_gpu) + " of " +
                  std::to_string(ranks.size()) + " see no CUDA device";
    return Status::ok();
  }
  if (knob == GpuOperations::kNccl && !crowded.empty())
    return Status::invalid_argument(
        "KOLO_GPU_OPERATIONS=nccl, but rank(s) " + join_ranks(crowded) +
        " share a host with more ranks than it has GPUs, and NCCL refuses two ranks on one GPU; "
        "use KOLO_GPU_OPERATIONS=staged or auto");
  const bool nccl = knob == GpuOperations::kNccl || (knob == GpuOperations::kAuto && crowded.empty());
  out->executor = nccl ? GpuPlan::Executor::kNccl : GpuPlan::Executor::kStaged;
  return Status::ok();
}

}  // namespace kolo::ops::gpu

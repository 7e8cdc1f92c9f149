#include "ops/gpu/gpu_executors.h"

#include <cuda_runtime_api.h>

#include <cstdlib>

#include "core/logging.h"
#include "ops/gpu/gpu_plan.h"
#include "ops/gpu/nccl_executor.h"
#include "ops/gpu/staged_executor.h"
#include "ops/mpi_util.h"

namespace kolo::ops::gpu {
namespace {

// Takes every GPU response when no GPU collective can run in this job, so that each rank
// fails it with the same explanation (instead of "no executor" or a hang).
class UnavailableGpuExecutor final : public Executor {
 public:
  explicit UnavailableGpuExecutor(std::string reason) : reason_(std::move(reason)) {}
  const char* name() const override { return "gpu-unavailable"; }
  bool accepts(const Response& r) const override { return !r.device.is_cpu(); }
  Status execute(const Response& r, std::vector<TensorEntry>&) override {
    return Status::invalid_argument("\"" + r.names.at(0) + "\" is on " + device_name(r.device) + ": " + reason_);
  }

 private:
  const std::string reason_;
};

// This rank's CUDA device count; 0, with CUDA's reason in *why, when CUDA is unusable here
// (no driver, no device).
int local_device_count(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
    cudaGetLastError();  // clear the error so later CUDA calls report their own
    return 0;
  }
  if (count == 0) *why = "cudaGetDeviceCount: 0 devices";
  return count;
}

}  // namespace

Status create_gpu_executors(const GpuExecutorSetup& setup, const Topology& topo, MpiExecutor* mpi,
                            std::vector<std::unique_ptr<Executor>>* out) {
  MPI_Comm data_comm = setup.data_comm;
  GpuOperations knob = GpuOperations::kAuto;
  KOLO_RETURN_IF_ERROR(parse_gpu_operations(setup.gpu_operations, &knob));

  std::string why;
  const int mine[2] = {local_device_count(&why), topo.local_size};
  std::vector<int> all(2 * static_cast<size_t>(topo.size));
  KOLO_RETURN_IF_ERROR(
      mpi_status(MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, data_comm), "MPI_Allgather(GPU facts)"));
  std::vector<RankGpuFacts> facts(static_cast<size_t>(topo.size));
  for (size_t r = 0; r < facts.size(); ++r) facts[r] = RankGpuFacts{all[2 * r], all[2 * r + 1]};
  GpuPlan plan;
  KOLO_RETURN_IF_ERROR(plan_gpu(knob, facts, &plan));

  switch (plan.executor) {
    case GpuPlan::Executor::kNccl: {
      auto nccl = std::make_unique<NcclExecutor>(data_comm);
      if (setup.hierarchical_allreduce) nccl->enable_hierarchical(setup.local_comm, setup.cross_comm);
      out->push_back(std::move(nccl));
      break;
    }
    case GpuPlan::Executor::kStaged: out->push_back(std::make_unique<StagedExecutor>(mpi, topo.rank)); break;
    case GpuPlan::Executor::kNone:
      if (!why.empty()) plan.reason += " (this rank: " + why + ")";
      out->push_back(std::make_unique<UnavailableGpuExecutor>(plan.reason));
      break;
  }
  KOLO_LOG(LogLevel::kDebug, "GPU executor: " << out->back()->name());
  return Status::ok();
}

}  // namespace kolo::ops::gpu

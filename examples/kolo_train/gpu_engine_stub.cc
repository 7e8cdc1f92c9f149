// kolo-train built without the GPU path: --device gpu explains itself.
#include <stdexcept>

#include "examples/kolo_train/device_engine.h"

namespace kolo::train {

std::unique_ptr<DeviceEngine> make_gpu_engine(const nn::Model&, const EngineOptimizer&, const DistributedOptions&) {
  throw std::runtime_error(
      "--device gpu: this kolo was built without the GPU path (configure with nvcc, NCCL and cuDNN present, "
      "or -DKOLO_WITH_CUDA=ON)");
}

}  // namespace kolo::train

// The GPU engine of kolo-train: a GpuModel, GPU loss and a GpuDistributedOptimizer.
#include <stdexcept>

#include "examples/kolo_train/device_engine.h"
#include "kolo/kolo.h"
#include "nn/gpu/distributed.h"
#include "nn/gpu/loss.h"
#include "nn/gpu/model.h"

namespace kolo::train {
namespace {

int pick_device() {
  const int gpus = nn::gpu::visible_gpus();
  if (gpus == 0) throw std::runtime_error("--device gpu: no CUDA device is visible to this rank");
  return kolo::local_rank() % gpus;
}

class GpuEngine final : public DeviceEngine {
 public:
  GpuEngine(const nn::Model& model, const EngineOptimizer& o, const DistributedOptions& dist)
      : model_(model, pick_device()), loss_(model_.context()), opt_(make_opt(o), dist) {}

  nn::LossResult train_step(const nn::Tensor& x, const std::vector<int32_t>& y, double lr, bool* updated) override {
    opt_.set_lr(lr);
    x_.upload(x, model_.context().stream());
    const auto res = loss_.forward(model_.forward(x_, true), y.data());
    model_.backward(x_, loss_.grad(), opt_.hook());
    *updated = opt_.step();
    if (*updated) opt_.zero_grad();
    return res;
  }

  const nn::Tensor& eval_logits(const nn::Tensor& x) override {
    x_.upload(x, model_.context().stream());
    model_.forward(x_, false).download(logits_, model_.context().stream());
    return logits_;
  }

  double last_wait_seconds() const override { return opt_.last_wait_seconds(); }

  void from_host(const nn::Model& model, Optimizer& opt) override {
    model_.upload_from(model);
    opt_.inner().copy_state_from(opt);
  }

  void to_host(nn::Model& model, Optimizer& opt) override {
    model_.download_to(model);
    opt_.inner().copy_state_to(opt);
  }

  std::string device_name() const override { return "gpu:" + std::to_string(device_); }

 private:
  std::unique_ptr<nn::gpu::GpuOptimizer> make_opt(const EngineOptimizer& o) {
    device_ = model_.context().device();
    if (o.kind == "sgd") return nn::gpu::GpuOptimizer::sgd(model_.params(), model_.context(), o.sgd);
    return nn::gpu::GpuOptimizer::adam(model_.params(), model_.context(), o.adam);
  }

  nn::gpu::GpuModel model_;
  nn::gpu::GpuSoftmaxCrossEntropy loss_;
  int device_ = 0;
  nn::gpu::GpuDistributedOptimizer opt_;
  nn::gpu::DeviceTensor x_;
  nn::Tensor logits_;
};

}  // namespace

std::unique_ptr<DeviceEngine> make_gpu_engine(const nn::Model& model, const EngineOptimizer& opt,
                                              const DistributedOptions& dist) {
  return std::make_unique<GpuEngine>(model, opt, dist);
}

}  // namespace kolo::train

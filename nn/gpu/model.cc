// GpuModel: the GPU builder policy for nn/architectures.h, layout check, host <-> device copies.
#include "nn/gpu/model.h"

#include <algorithm>
#include <stdexcept>

#include "nn/architectures.h"
#include "nn/gpu/batchnorm.h"
#include "nn/gpu/conv.h"
#include "nn/gpu/layers.h"
#include "nn/gpu/residual.h"

namespace kolo::nn::gpu {
namespace {

// The GPU builder policy for nn/architectures.h.
struct GpuBuilder {
  using Chain = GpuChain;
  using LayerPtr = std::unique_ptr<GpuLayer>;

  static LayerPtr conv(const std::string& name, const ConvSpec& spec) {
    return std::make_unique<GpuConv2d>(name, spec);
  }
  static void batch_norm(Chain& c, const std::string& name, const std::string& relu_name) {
    c.add(std::make_unique<GpuBatchNorm2d>(name));
    if (!relu_name.empty()) c.add(relu(relu_name));
  }
  static LayerPtr relu(const std::string& name) { return std::make_unique<GpuReLU>(name); }
  static LayerPtr max_pool(const std::string& name, int kernel, int stride, int padding) {
    return std::make_unique<GpuPool>(name, kernel, stride, padding);
  }
  static LayerPtr flatten(const std::string& name) { return std::make_unique<GpuFlatten>(name); }
  static LayerPtr global_avg_pool(const std::string& name) { return GpuPool::global_average(name); }
  static LayerPtr linear(const std::string& name, int out) { return std::make_unique<GpuLinear>(name, out); }
  static LayerPtr residual(const std::string& name, Chain main, Chain shortcut) {
    return std::make_unique<GpuResidual>(name, std::move(main), std::move(shortcut));
  }
};

}  // namespace

GpuChain make_gpu_layers(const std::string& arch, int num_classes) {
  auto layers = architectures::build<GpuBuilder>(arch, num_classes);
  if (!layers) {
    throw std::invalid_argument("no GPU layers for model \"" + arch + "\" (known: " +
                                architectures::name_list() + ")");
  }
  return std::move(*layers);
}

void check_same_layout(const ParamStore& cpu, const ParamStore& gpu, const std::string& what) {
  const auto& a = cpu.infos();
  const auto& b = gpu.infos();
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i].name != b[i].name || a[i].shape != b[i].shape || a[i].offset != b[i].offset) {
      throw std::invalid_argument(what + " tensor " + std::to_string(i) + ": CPU has \"" + a[i].name + "\" " +
                                  dims_string(a[i].shape) + " at " + std::to_string(a[i].offset) + ", GPU has \"" +
                                  b[i].name + "\" " + dims_string(b[i].shape) + " at " + std::to_string(b[i].offset));
    }
  }
  if (a.size() != b.size()) {
    throw std::invalid_argument(what + ": CPU has " + std::to_string(a.size()) + " tensors, GPU " +
                                std::to_string(b.size()));
  }
}

GpuModel::GpuModel(const Model& cpu, int device)
    : arch_(cpu.arch()),
      input_(cpu.input_shape()),
      ctx_(std::make_unique<GpuContext>(device)),
      params_(std::make_unique<DeviceParams>(true)),
      buffers_(std::make_unique<DeviceParams>(false)),
      layers_(make_gpu_layers(cpu.arch(), cpu.output_shape().at(0))) {
  GpuBuildContext build{ctx_.get(), params_.get(), buffers_.get(), ""};
  const Dims out = layers_.setup(input_, build);
  if (out != cpu.output_shape()) {
    throw std::invalid_argument(arch_ + ": GPU output " + dims_string(out) + " differs from the CPU model's " +
                                dims_string(cpu.output_shape()));
  }
  params_->finalize();
  buffers_->finalize();
  check_same_layout(cpu.params(), params_->host(), arch_ + " parameters");
  check_same_layout(cpu.buffers(), buffers_->host(), arch_ + " buffers");
  upload_from(cpu);
}

const DeviceTensor& GpuModel::forward(const DeviceTensor& x, bool train) {
  if (x.rank() != input_.size() + 1 || !std::equal(input_.begin(), input_.end(), x.shape().begin() + 1)) {
    throw std::invalid_argument(arch_ + ": input " + dims_string(x.shape()) +
                                " does not match the model's per-sample shape " + dims_string(input_));
  }
  return layers_.forward(x, train);
}

void GpuModel::backward(const DeviceTensor& x, const DeviceTensor& dlogits, const GradReadyFn& ready) {
  GpuLayerDoneFn done;
  if (ready) {
    done = [&ready](size_t, const GpuLayer& layer) {
      if (!layer.param_indices().empty()) ready(layer.param_indices());
    };
  }
  layers_.backward(x, dlogits, nullptr, done);
}

void GpuModel::upload_from(const Model& cpu) {
  params_->upload_values(cpu.params().values().data(), ctx_->stream());
  buffers_->upload_values(cpu.buffers().values().data(), ctx_->stream());
}

void GpuModel::download_to(Model& cpu) {
  params_->download_values(cpu.params().values().data(), ctx_->stream());
  buffers_->download_values(cpu.buffers().values().data(), ctx_->stream());
}

}  // namespace kolo::nn::gpu

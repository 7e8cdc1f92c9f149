// GpuModel: builders mirroring nn/models.cc, layout check, host <-> device copies.
#include "nn/gpu/model.h"

#include <algorithm>
#include <stdexcept>

#include "nn/gpu/batchnorm.h"
#include "nn/gpu/conv.h"
#include "nn/gpu/layers.h"
#include "nn/gpu/residual.h"

namespace kolo::nn::gpu {
namespace {

std::unique_ptr<GpuLayer> conv(const std::string& name, int out, int k, int stride, int pad, bool bias) {
  return std::make_unique<GpuConv2d>(name, ConvSpec{out, k, stride, pad, bias});
}

void conv_bn_relu(GpuChain& c, const std::string& conv_name, const std::string& bn_name, int out, int k, int stride,
                  int pad, bool relu) {
  c.add(conv(conv_name, out, k, stride, pad, false));
  c.add(std::make_unique<GpuBatchNorm2d>(bn_name));
  if (relu) c.add(std::make_unique<GpuReLU>(conv_name + ".relu"));
}

GpuChain projection(int out, int stride) {
  GpuChain s;
  s.add(conv("downsample.0", out, 1, stride, 0, false));
  s.add(std::make_unique<GpuBatchNorm2d>("downsample.1"));
  return s;
}

GpuChain lenet(int num_classes) {
  GpuChain c;
  c.add(conv("conv1", 6, 5, 1, 2, true));
  c.add(std::make_unique<GpuReLU>("relu1"));
  c.add(std::make_unique<GpuPool>("pool1", 2, 2, 0));
  c.add(conv("conv2", 16, 5, 1, 0, true));
  c.add(std::make_unique<GpuReLU>("relu2"));
  c.add(std::make_unique<GpuPool>("pool2", 2, 2, 0));
  c.add(std::make_unique<GpuFlatten>("flatten"));
  c.add(std::make_unique<GpuLinear>("fc1", 120));
  c.add(std::make_unique<GpuReLU>("relu3"));
  c.add(std::make_unique<GpuLinear>("fc2", 84));
  c.add(std::make_unique<GpuReLU>("relu4"));
  c.add(std::make_unique<GpuLinear>("fc3", num_classes));
  return c;
}

std::unique_ptr<GpuLayer> basic_block(const std::string& name, int in, int out, int stride) {
  GpuChain m;
  conv_bn_relu(m, "conv1", "bn1", out, 3, stride, 1, true);
  conv_bn_relu(m, "conv2", "bn2", out, 3, 1, 1, false);
  GpuChain s = (stride != 1 || in != out) ? projection(out, stride) : GpuChain{};
  return std::make_unique<GpuResidual>(name, std::move(m), std::move(s));
}

GpuChain cifar_resnet(int depth, int num_classes) {
  const int n = (depth - 2) / 6;
  GpuChain c;
  conv_bn_relu(c, "conv1", "bn1", 16, 3, 1, 1, true);
  int in = 16;
  for (int stage = 0; stage < 3; ++stage) {
    const int out = 16 << stage;
    for (int b = 0; b < n; ++b) {
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      c.add(basic_block(name, in, out, b == 0 && stage > 0 ? 2 : 1));
      in = out;
    }
  }
  c.add(GpuPool::global_average("avgpool"));
  c.add(std::make_unique<GpuLinear>("fc", num_classes));
  return c;
}

std::unique_ptr<GpuLayer> bottleneck(const std::string& name, int in, int width, int stride) {
  GpuChain m;
  conv_bn_relu(m, "conv1", "bn1", width, 1, 1, 0, true);
  conv_bn_relu(m, "conv2", "bn2", width, 3, stride, 1, true);
  conv_bn_relu(m, "conv3", "bn3", width * 4, 1, 1, 0, false);
  GpuChain s = (stride != 1 || in != width * 4) ? projection(width * 4, stride) : GpuChain{};
  return std::make_unique<GpuResidual>(name, std::move(m), std::move(s));
}

GpuChain resnet50(int num_classes) {
  GpuChain c;
  conv_bn_relu(c, "conv1", "bn1", 64, 7, 2, 3, true);
  c.add(std::make_unique<GpuPool>("maxpool", 3, 2, 1));
  const int blocks[4] = {3, 4, 6, 3};
  int in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int width = 64 << stage;
    for (int b = 0; b < blocks[stage]; ++b) {
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      c.add(bottleneck(name, in, width, b == 0 && stage > 0 ? 2 : 1));
      in = width * 4;
    }
  }
  c.add(GpuPool::global_average("avgpool"));
  c.add(std::make_unique<GpuLinear>("fc", num_classes));
  return c;
}

}  // namespace

GpuChain make_gpu_layers(const std::string& arch, int num_classes) {
  if (arch == "lenet") return lenet(num_classes);
  if (arch == "resnet20") return cifar_resnet(20, num_classes);
  if (arch == "resnet56") return cifar_resnet(56, num_classes);
  if (arch == "resnet50") return resnet50(num_classes);
  throw std::invalid_argument("no GPU layers for model \"" + arch + "\" (known: lenet, resnet20, resnet56, resnet50)");
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

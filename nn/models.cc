// The CPU builder policy for nn/architectures.h, and make_model.
#include "nn/models.h"

#include <stdexcept>

#include "nn/architectures.h"
#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/layers.h"
#include "nn/residual.h"

namespace kolo::nn {
namespace {

struct CpuBuilder {
  using Chain = nn::Chain;
  using LayerPtr = std::unique_ptr<Layer>;

  static LayerPtr conv(const std::string& name, const ConvSpec& spec) {
    return std::make_unique<Conv2d>(name, spec);
  }
  static void batch_norm(Chain& c, const std::string& name, const std::string& relu_name) {
    // The ReLU is fused into the BatchNorm: one pass over the activations instead of two.
    if (!relu_name.empty()) c.add(BatchNorm2d::with_relu(name));
    else c.add(std::make_unique<BatchNorm2d>(name));
  }
  static LayerPtr relu(const std::string& name) { return std::make_unique<ReLU>(name); }
  static LayerPtr max_pool(const std::string& name, int kernel, int stride, int padding) {
    return std::make_unique<MaxPool2d>(name, kernel, stride, padding);
  }
  static LayerPtr flatten(const std::string& name) { return std::make_unique<Flatten>(name); }
  static LayerPtr global_avg_pool(const std::string& name) {
    return std::make_unique<GlobalAvgPool>(name);
  }
  static LayerPtr linear(const std::string& name, int out) {
    return std::make_unique<Linear>(name, out);
  }
  static LayerPtr residual(const std::string& name, Chain main, Chain shortcut) {
    return std::make_unique<Residual>(name, std::move(main), std::move(shortcut));
  }
};

}  // namespace

std::vector<std::string> model_names() { return architectures::names(); }

std::unique_ptr<Model> make_model(const std::string& arch, const Dims& input, int num_classes,
                                  uint64_t seed) {
  auto layers = architectures::build<CpuBuilder>(arch, num_classes);
  if (!layers) {
    throw std::invalid_argument("unknown model \"" + arch +
                                "\" (known: " + architectures::name_list() + ")");
  }
  return std::make_unique<Model>(arch, input, std::move(*layers), seed);
}

}  // namespace kolo::nn

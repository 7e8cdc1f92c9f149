// nn/models.h — the bundled architectures.
//
//   lenet     LeNet-5 with ReLU and max pooling (conv6-5x5 pad 2, pool, conv16-5x5, pool,
//             fc120, fc84, fc) — 28x28x1 Fashion-MNIST/MNIST (any input >= 8x8 works).
//   resnet20  CIFAR-style ResNet (He et al. 2016, section 4.2): 3x3 conv 16, three stages of
//   resnet56  n basic blocks (16, 32, 64 channels; n = 3 or 9), global average pool, fc.
//             Downsampling blocks use a 1x1 convolution + BatchNorm shortcut ("option B").
//             Works on 28x28x1 and 32x32x3.
//   resnet50  torchvision's ResNet-50 (v1.5: stride on the 3x3 conv of each bottleneck),
//             224x224x3; 161 parameter tensors, 25,557,032 values for 1000 classes.
// Parameter names follow torchvision ("layer2.0.downsample.0.weight").
// Ownership: the caller owns the returned Model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/model.h"

namespace kolo::nn {

// Throws std::invalid_argument listing the known names when `arch` is unknown.
std::unique_ptr<Model> make_model(const std::string& arch, const Dims& input, int num_classes,
                                  uint64_t seed);
std::vector<std::string> model_names();

}  // namespace kolo::nn

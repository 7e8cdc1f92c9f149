// nn/gpu/loss.h — softmax cross-entropy on the GPU, the twin of nn::SoftmaxCrossEntropy:
// forward() returns the batch's mean loss and correct count (summed on the host in double
// from per-row values) and keeps d(mean loss)/d(logits) on the device for grad().
// Labels are checked on the host (a bad one throws std::invalid_argument naming it).
// Ownership: owns its gradient and scratch; borrows the context.
// Thread safety: none. forward() waits for the stream (it returns host numbers).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/gpu/context.h"
#include "nn/gpu/device_tensor.h"
#include "nn/loss.h"

namespace kolo::nn::gpu {

class GpuSoftmaxCrossEntropy {
 public:
  explicit GpuSoftmaxCrossEntropy(GpuContext& ctx) : ctx_(ctx) {}
  ~GpuSoftmaxCrossEntropy();
  GpuSoftmaxCrossEntropy(const GpuSoftmaxCrossEntropy&) = delete;
  GpuSoftmaxCrossEntropy& operator=(const GpuSoftmaxCrossEntropy&) = delete;

  // logits [N, K] on the device; labels: N host values in [0, K).
  LossResult forward(const DeviceTensor& logits, const int32_t* labels);
  const DeviceTensor& grad() const { return grad_; }

 private:
  GpuContext& ctx_;
  DeviceTensor grad_, row_stats_;
  int32_t* labels_dev_ = nullptr;
  int labels_capacity_ = 0;
  std::vector<float> stats_host_;
};

}  // namespace kolo::nn::gpu

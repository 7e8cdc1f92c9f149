// GpuSoftmaxCrossEntropy: label check, one kernel, per-row results summed on the host.
#include "nn/gpu/loss.h"

#include <stdexcept>
#include <string>

#include "nn/gpu/kernels.h"

namespace kolo::nn::gpu {

GpuSoftmaxCrossEntropy::~GpuSoftmaxCrossEntropy() {
  if (labels_dev_) cudaFree(labels_dev_);
}

LossResult GpuSoftmaxCrossEntropy::forward(const DeviceTensor& logits, const int32_t* labels) {
  const int n = logits.dim(0), k = logits.dim(1);
  for (int i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= k) {
      throw std::invalid_argument("label " + std::to_string(labels[i]) + " of sample " + std::to_string(i) +
                                  " is outside [0," + std::to_string(k) + ")");
    }
  }
  if (n > labels_capacity_) {
    if (labels_dev_) KOLO_NN_CUDA(cudaFree(labels_dev_));
    labels_dev_ = nullptr;
    labels_capacity_ = 0;
    KOLO_NN_CUDA(cudaMalloc(reinterpret_cast<void**>(&labels_dev_), static_cast<size_t>(n) * sizeof(int32_t)));
    labels_capacity_ = n;
  }
  LossResult r;
  grad_.resize(logits.shape());
  if (n == 0) return r;
  row_stats_.resize({n, 2});
  cudaStream_t s = ctx_.stream();
  KOLO_NN_CUDA(cudaMemcpyAsync(labels_dev_, labels, static_cast<size_t>(n) * sizeof(int32_t), cudaMemcpyHostToDevice, s));
  softmax_xent(logits.data(), labels_dev_, n, k, grad_.data(), row_stats_.data(), s);
  stats_host_.resize(static_cast<size_t>(2 * n));
  KOLO_NN_CUDA(cudaMemcpyAsync(stats_host_.data(), row_stats_.data(), stats_host_.size() * sizeof(float),
                               cudaMemcpyDeviceToHost, s));
  KOLO_NN_CUDA(cudaStreamSynchronize(s));
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    total += stats_host_[static_cast<size_t>(2 * i)];
    if (stats_host_[static_cast<size_t>(2 * i + 1)] > 0.5f) ++r.correct;
  }
  r.loss = total / n;
  return r;
}

}  // namespace kolo::nn::gpu

// DeviceParams: one device allocation for values, one for gradients.
#include "nn/gpu/device_params.h"

#include "nn/gpu/context.h"

namespace kolo::nn::gpu {

DeviceParams::~DeviceParams() {
  if (values_) cudaFree(values_);
  if (grads_) cudaFree(grads_);
}

void DeviceParams::finalize() {
  host_.finalize();
  const size_t bytes = (total_size() == 0 ? 1 : total_size()) * sizeof(float);
  if (!values_) {
    KOLO_NN_CUDA(cudaMalloc(reinterpret_cast<void**>(&values_), bytes));
    KOLO_NN_CUDA(cudaMemset(values_, 0, bytes));
  }
  if (with_grads_ && !grads_) {
    KOLO_NN_CUDA(cudaMalloc(reinterpret_cast<void**>(&grads_), bytes));
    KOLO_NN_CUDA(cudaMemset(grads_, 0, bytes));
  }
  // cudaMemset runs on the legacy default stream, which the model's non-blocking stream
  // does not wait for: without this, the zeroing could land after upload_values() or the
  // first backward (which accumulates into the gradients).
  KOLO_NN_CUDA(cudaDeviceSynchronize());
}

void DeviceParams::upload_values(const float* src, cudaStream_t stream) {
  if (total_size() == 0) return;
  KOLO_NN_CUDA(cudaMemcpyAsync(values_, src, total_size() * sizeof(float), cudaMemcpyHostToDevice, stream));
  KOLO_NN_CUDA(cudaStreamSynchronize(stream));
}

void DeviceParams::download_values(float* dst, cudaStream_t stream) const {
  if (total_size() == 0) return;
  KOLO_NN_CUDA(cudaMemcpyAsync(dst, values_, total_size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
  KOLO_NN_CUDA(cudaStreamSynchronize(stream));
}

void DeviceParams::zero_grads(cudaStream_t stream) {
  if (grads_ && total_size() > 0) KOLO_NN_CUDA(cudaMemsetAsync(grads_, 0, total_size() * sizeof(float), stream));
}

}  // namespace kolo::nn::gpu

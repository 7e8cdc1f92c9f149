// DeviceTensor: growable device storage and host transfers.
#include "nn/gpu/device_tensor.h"

#include <utility>

#include "nn/gpu/context.h"

namespace kolo::nn::gpu {

DeviceTensor::~DeviceTensor() {
  if (data_) cudaFree(data_);
}

DeviceTensor::DeviceTensor(DeviceTensor&& o) noexcept
    : shape_(std::move(o.shape_)), size_(o.size_), capacity_(o.capacity_), data_(o.data_) {
  o.data_ = nullptr;
  o.size_ = o.capacity_ = 0;
}

DeviceTensor& DeviceTensor::operator=(DeviceTensor&& o) noexcept {
  if (this != &o) {
    if (data_) cudaFree(data_);
    shape_ = std::move(o.shape_);
    size_ = o.size_;
    capacity_ = o.capacity_;
    data_ = o.data_;
    o.data_ = nullptr;
    o.size_ = o.capacity_ = 0;
  }
  return *this;
}

void DeviceTensor::resize(Dims shape) {
  const int64_t n = dims_product(shape);
  if (n > capacity_) {
    if (data_) KOLO_NN_CUDA(cudaFree(data_));
    data_ = nullptr;
    capacity_ = 0;
    KOLO_NN_CUDA(cudaMalloc(reinterpret_cast<void**>(&data_), static_cast<size_t>(n) * sizeof(float)));
    capacity_ = n;
  }
  shape_ = std::move(shape);
  size_ = n;
}

void DeviceTensor::zero(cudaStream_t stream) {
  if (size_ > 0) KOLO_NN_CUDA(cudaMemsetAsync(data_, 0, static_cast<size_t>(size_) * sizeof(float), stream));
}

void DeviceTensor::upload(const Tensor& host, cudaStream_t stream) {
  resize(host.shape());
  if (size_ == 0) return;
  KOLO_NN_CUDA(cudaMemcpyAsync(data_, host.data(), static_cast<size_t>(size_) * sizeof(float),
                               cudaMemcpyHostToDevice, stream));
  KOLO_NN_CUDA(cudaStreamSynchronize(stream));
}

void DeviceTensor::download(Tensor& host, cudaStream_t stream) const {
  host.resize(shape_);
  if (size_ == 0) return;
  KOLO_NN_CUDA(cudaMemcpyAsync(host.data(), data_, static_cast<size_t>(size_) * sizeof(float),
                               cudaMemcpyDeviceToHost, stream));
  KOLO_NN_CUDA(cudaStreamSynchronize(stream));
}

}  // namespace kolo::nn::gpu

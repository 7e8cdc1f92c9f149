// nn/gpu/cudnn_desc.h — owning wrappers of the cuDNN descriptors the GPU layers use, so a
// layer's descriptors are freed with it and set in one line.
// Ownership: each wrapper owns its descriptor. Thread safety: none.
#pragma once

#include <cudnn.h>

#include "nn/gpu/context.h"

namespace kolo::nn::gpu {

class TensorDesc {
 public:
  TensorDesc() { KOLO_NN_CUDNN(cudnnCreateTensorDescriptor(&d_)); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  // fp32, NCHW, packed.
  void set(int n, int c, int h, int w) {
    KOLO_NN_CUDNN(cudnnSetTensor4dDescriptor(d_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
  }
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

class FilterDesc {
 public:
  FilterDesc() { KOLO_NN_CUDNN(cudnnCreateFilterDescriptor(&d_)); }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d_); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  void set(int out, int in, int kh, int kw) {
    KOLO_NN_CUDNN(cudnnSetFilter4dDescriptor(d_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, out, in, kh, kw));
  }
  cudnnFilterDescriptor_t get() const { return d_; }

 private:
  cudnnFilterDescriptor_t d_ = nullptr;
};

class ConvDesc {
 public:
  ConvDesc() { KOLO_NN_CUDNN(cudnnCreateConvolutionDescriptor(&d_)); }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d_); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  cudnnConvolutionDescriptor_t get() const { return d_; }

 private:
  cudnnConvolutionDescriptor_t d_ = nullptr;
};

class PoolDesc {
 public:
  PoolDesc() { KOLO_NN_CUDNN(cudnnCreatePoolingDescriptor(&d_)); }
  ~PoolDesc() { cudnnDestroyPoolingDescriptor(d_); }
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
  void set(cudnnPoolingMode_t mode, int window_h, int window_w, int pad, int stride) {
    KOLO_NN_CUDNN(cudnnSetPooling2dDescriptor(d_, mode, CUDNN_NOT_PROPAGATE_NAN, window_h, window_w, pad, pad,
                                              stride, stride));
  }
  cudnnPoolingDescriptor_t get() const { return d_; }

 private:
  cudnnPoolingDescriptor_t d_ = nullptr;
};

class ActivationDesc {
 public:
  ActivationDesc() { KOLO_NN_CUDNN(cudnnCreateActivationDescriptor(&d_)); }
  ~ActivationDesc() { cudnnDestroyActivationDescriptor(d_); }
  ActivationDesc(const ActivationDesc&) = delete;
  ActivationDesc& operator=(const ActivationDesc&) = delete;
  void set_relu() {
    KOLO_NN_CUDNN(cudnnSetActivationDescriptor(d_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  }
  cudnnActivationDescriptor_t get() const { return d_; }

 private:
  cudnnActivationDescriptor_t d_ = nullptr;
};

}  // namespace kolo::nn::gpu

// GpuLinear (cuBLAS), GpuReLU (cuDNN activation), GpuPool (cuDNN pooling), GpuFlatten.
#include "nn/gpu/layers.h"

#include <stdexcept>

#include "nn/gpu/kernels.h"

namespace kolo::nn::gpu {
namespace {
constexpr float kOne = 1.0f, kZero = 0.0f;

void copy(float* dst, const float* src, int64_t n, cudaStream_t stream) {
  if (n > 0) KOLO_NN_CUDA(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}
}  // namespace

// Row-major [N, in] x [out, in]^T in cuBLAS's column-major terms: Y^T (out x N) =
// W (out x in, i.e. column-major W^T transposed) * X^T (in x N).
Dims GpuLinear::setup(const Dims& in, GpuBuildContext& ctx) {
  bind(ctx);
  if (in.size() != 1) {
    throw std::invalid_argument("GpuLinear \"" + full_name(ctx) + "\": expects [features], got " + dims_string(in));
  }
  in_ = in[0];
  weight_ = add_param(ctx, "weight", {out_, in_});
  bias_ = add_param(ctx, "bias", {out_});
  return {out_};
}

void GpuLinear::forward(const DeviceTensor& x, DeviceTensor& y, bool) {
  const int n = x.dim(0);
  y.resize({n, out_});
  KOLO_NN_CUBLAS(cublasSgemm(gpu_->cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out_, n, in_, &kOne, params_->value(weight_), in_,
                             x.data(), in_, &kZero, y.data(), out_));
  add_bias_rows(y.data(), params_->value(bias_), n, out_, gpu_->stream());
}

void GpuLinear::backward(const DeviceTensor& x, const DeviceTensor&, const DeviceTensor& dy, DeviceTensor* dx) {
  const int n = x.dim(0);
  // dW (out x in, row-major) += dy^T x: column-major dW^T (in x out) = X^T (in x N) * dy (N x out).
  KOLO_NN_CUBLAS(cublasSgemm(gpu_->cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, n, &kOne, x.data(), in_, dy.data(),
                             out_, &kOne, params_->grad(weight_), in_));
  bias_grad_rows(dy.data(), params_->grad(bias_), n, out_, gpu_->stream());
  if (dx) {
    dx->resize(x.shape());
    // dx (N x in) = dy W: column-major dx^T (in x N) = W^T (in x out) * dy^T (out x N).
    KOLO_NN_CUBLAS(cublasSgemm(gpu_->cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in_, n, out_, &kOne, params_->value(weight_),
                               in_, dy.data(), out_, &kZero, dx->data(), in_));
  }
}

Dims GpuReLU::setup(const Dims& in, GpuBuildContext& ctx) {
  bind(ctx);
  act_.set_relu();
  return in;
}

void GpuReLU::set_desc(const DeviceTensor& x) {
  if (x.size() == desc_size_) return;
  const int n = x.dim(0);
  desc_.set(n, static_cast<int>(x.size() / (n == 0 ? 1 : n)), 1, 1);
  desc_size_ = x.size();
}

void GpuReLU::forward(const DeviceTensor& x, DeviceTensor& y, bool) {
  y.resize(x.shape());
  if (x.size() == 0) return;
  set_desc(x);
  KOLO_NN_CUDNN(cudnnActivationForward(gpu_->cudnn(), act_.get(), &kOne, desc_.get(), x.data(), &kZero, desc_.get(), y.data()));
}

void GpuReLU::backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy, DeviceTensor* dx) {
  if (!dx) return;
  dx->resize(x.shape());
  if (x.size() == 0) return;
  set_desc(x);
  KOLO_NN_CUDNN(cudnnActivationBackward(gpu_->cudnn(), act_.get(), &kOne, desc_.get(), y.data(), desc_.get(), dy.data(),
                                        desc_.get(), x.data(), &kZero, desc_.get(), dx->data()));
}

std::unique_ptr<GpuPool> GpuPool::global_average(std::string name) {
  return std::unique_ptr<GpuPool>(new GpuPool(std::move(name)));
}

Dims GpuPool::setup(const Dims& in, GpuBuildContext& ctx) {
  bind(ctx);
  if (in.size() != 3) throw std::invalid_argument("GpuPool \"" + full_name(ctx) + "\": expects [C,H,W], got " + dims_string(in));
  c_ = in[0];
  h_ = in[1];
  w_ = in[2];
  if (global_) {
    oh_ = ow_ = 1;
    pool_.set(CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, h_, w_, 0, 1);
    return {c_};
  }
  oh_ = (h_ + 2 * p_ - k_) / s_ + 1;
  ow_ = (w_ + 2 * p_ - k_) / s_ + 1;
  if (oh_ <= 0 || ow_ <= 0) throw std::invalid_argument("GpuPool \"" + full_name(ctx) + "\": input too small");
  pool_.set(CUDNN_POOLING_MAX, k_, k_, p_, s_);
  return {c_, oh_, ow_};
}

void GpuPool::set_desc(int n) {
  if (n == desc_n_) return;
  x_desc_.set(n, c_, h_, w_);
  y_desc_.set(n, c_, oh_, ow_);
  desc_n_ = n;
}

void GpuPool::forward(const DeviceTensor& x, DeviceTensor& y, bool) {
  const int n = x.dim(0);
  set_desc(n);
  if (global_) y.resize({n, c_});
  else y.resize({n, c_, oh_, ow_});
  KOLO_NN_CUDNN(cudnnPoolingForward(gpu_->cudnn(), pool_.get(), &kOne, x_desc_.get(), x.data(), &kZero, y_desc_.get(), y.data()));
}

void GpuPool::backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy, DeviceTensor* dx) {
  if (!dx) return;
  set_desc(x.dim(0));
  dx->resize(x.shape());
  KOLO_NN_CUDNN(cudnnPoolingBackward(gpu_->cudnn(), pool_.get(), &kOne, y_desc_.get(), y.data(), y_desc_.get(), dy.data(),
                                     x_desc_.get(), x.data(), &kZero, x_desc_.get(), dx->data()));
}

Dims GpuFlatten::setup(const Dims& in, GpuBuildContext& ctx) {
  bind(ctx);
  return {static_cast<int>(dims_product(in))};
}

void GpuFlatten::forward(const DeviceTensor& x, DeviceTensor& y, bool) {
  const int n = x.dim(0);
  y.resize({n, static_cast<int>(x.size() / (n == 0 ? 1 : n))});
  copy(y.data(), x.data(), x.size(), gpu_->stream());
}

void GpuFlatten::backward(const DeviceTensor& x, const DeviceTensor&, const DeviceTensor& dy, DeviceTensor* dx) {
  if (!dx) return;
  dx->resize(x.shape());
  copy(dx->data(), dy.data(), dy.size(), gpu_->stream());
}

}  // namespace kolo::nn::gpu

// GpuConv2d: cuDNN forward/backward with per-batch-size algorithm choice.
#include "nn/gpu/conv.h"

#include <stdexcept>

namespace kolo::nn::gpu {
namespace {

constexpr float kOne = 1.0f, kZero = 0.0f;
constexpr int kCandidates = 8;

// The first (fastest) successful result within the workspace limit; false if none.
template <class Perf>
bool pick(const Perf* results, int count, size_t limit, const Perf** out) {
  for (int i = 0; i < count; ++i) {
    if (results[i].status == CUDNN_STATUS_SUCCESS && results[i].memory <= limit) {
      *out = &results[i];
      return true;
    }
  }
  return false;
}

}  // namespace

Dims GpuConv2d::setup(const Dims& in, GpuBuildContext& ctx) {
  bind(ctx);
  if (in.size() != 3) {
    throw std::invalid_argument("GpuConv2d \"" + full_name(ctx) + "\": expects [C,H,W] input, got " + dims_string(in));
  }
  in_c_ = in[0];
  in_h_ = in[1];
  in_w_ = in[2];
  const int k = spec_.kernel;
  out_h_ = (in_h_ + 2 * spec_.padding - k) / spec_.stride + 1;
  out_w_ = (in_w_ + 2 * spec_.padding - k) / spec_.stride + 1;
  if (out_h_ <= 0 || out_w_ <= 0) {
    throw std::invalid_argument("GpuConv2d \"" + full_name(ctx) + "\": input " + dims_string(in) + " is smaller than its " +
                                std::to_string(k) + "x" + std::to_string(k) + " kernel");
  }
  weight_ = add_param(ctx, "weight", {spec_.out_channels, in_c_, k, k});
  if (spec_.bias) {
    bias_ = add_param(ctx, "bias", {spec_.out_channels});
    bias_desc_.set(1, spec_.out_channels, 1, 1);
  }
  w_desc_.set(spec_.out_channels, in_c_, k, k);
  KOLO_NN_CUDNN(cudnnSetConvolution2dDescriptor(conv_desc_.get(), spec_.padding, spec_.padding, spec_.stride,
                                                spec_.stride, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  return {spec_.out_channels, out_h_, out_w_};
}

GpuConv2d::Algos GpuConv2d::choose() {
  cudnnHandle_t h = gpu_->cudnn();
  auto conv = conv_desc_.get();
  Algos a;
  int found = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[kCandidates];
  const cudnnConvolutionFwdAlgoPerf_t* f = nullptr;
  if (cudnnFindConvolutionForwardAlgorithm(h, x_desc_.get(), w_desc_.get(), conv, y_desc_.get(), kCandidates, &found,
                                           fwd) != CUDNN_STATUS_SUCCESS ||
      !pick(fwd, found, kMaxWorkspaceBytes, &f)) {
    KOLO_NN_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(h, x_desc_.get(), w_desc_.get(), conv, y_desc_.get(),
                                                         kCandidates, &found, fwd));
    if (!pick(fwd, found, kMaxWorkspaceBytes, &f)) throw std::runtime_error("GpuConv2d \"" + name() + "\": no forward algorithm");
  }
  a.fwd = f->algo;
  a.fwd_math = f->mathType;
  a.workspace = f->memory;

  cudnnConvolutionBwdDataAlgoPerf_t bd[kCandidates];
  const cudnnConvolutionBwdDataAlgoPerf_t* d = nullptr;
  if (cudnnFindConvolutionBackwardDataAlgorithm(h, w_desc_.get(), y_desc_.get(), conv, x_desc_.get(), kCandidates,
                                                &found, bd) != CUDNN_STATUS_SUCCESS ||
      !pick(bd, found, kMaxWorkspaceBytes, &d)) {
    KOLO_NN_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w_desc_.get(), y_desc_.get(), conv, x_desc_.get(),
                                                              kCandidates, &found, bd));
    if (!pick(bd, found, kMaxWorkspaceBytes, &d)) throw std::runtime_error("GpuConv2d \"" + name() + "\": no backward-data algorithm");
  }
  a.bwd_data = d->algo;
  a.bwd_data_math = d->mathType;
  a.workspace = std::max(a.workspace, d->memory);

  cudnnConvolutionBwdFilterAlgoPerf_t bf[kCandidates];
  const cudnnConvolutionBwdFilterAlgoPerf_t* w = nullptr;
  if (cudnnFindConvolutionBackwardFilterAlgorithm(h, x_desc_.get(), y_desc_.get(), conv, w_desc_.get(), kCandidates,
                                                  &found, bf) != CUDNN_STATUS_SUCCESS ||
      !pick(bf, found, kMaxWorkspaceBytes, &w)) {
    KOLO_NN_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x_desc_.get(), y_desc_.get(), conv, w_desc_.get(),
                                                                kCandidates, &found, bf));
    if (!pick(bf, found, kMaxWorkspaceBytes, &w)) throw std::runtime_error("GpuConv2d \"" + name() + "\": no backward-filter algorithm");
  }
  a.bwd_filter = w->algo;
  a.bwd_filter_math = w->mathType;
  a.workspace = std::max(a.workspace, w->memory);
  return a;
}

const GpuConv2d::Algos& GpuConv2d::prepare(int n) {
  if (n != desc_n_) {
    x_desc_.set(n, in_c_, in_h_, in_w_);
    y_desc_.set(n, spec_.out_channels, out_h_, out_w_);
    desc_n_ = n;
  }
  auto it = algos_.find(n);
  if (it == algos_.end()) {
    // Find runs the candidates on the handle's stream; earlier work must not be timed.
    gpu_->synchronize();
    it = algos_.emplace(n, choose()).first;
  }
  return it->second;
}

void GpuConv2d::forward(const DeviceTensor& x, DeviceTensor& y, bool) {
  const int n = x.dim(0);
  const Algos& a = prepare(n);
  y.resize({n, spec_.out_channels, out_h_, out_w_});
  void* ws = gpu_->workspace(a.workspace);
  cudnnHandle_t h = gpu_->cudnn();
  KOLO_NN_CUDNN(cudnnSetConvolutionMathType(conv_desc_.get(), a.fwd_math));
  KOLO_NN_CUDNN(cudnnConvolutionForward(h, &kOne, x_desc_.get(), x.data(), w_desc_.get(), params_->value(weight_),
                                        conv_desc_.get(), a.fwd, ws, a.workspace, &kZero, y_desc_.get(), y.data()));
  if (bias_ >= 0)
    KOLO_NN_CUDNN(cudnnAddTensor(h, &kOne, bias_desc_.get(), params_->value(bias_), &kOne, y_desc_.get(), y.data()));
}

void GpuConv2d::backward(const DeviceTensor& x, const DeviceTensor&, const DeviceTensor& dy, DeviceTensor* dx) {
  const Algos& a = prepare(x.dim(0));
  void* ws = gpu_->workspace(a.workspace);
  cudnnHandle_t h = gpu_->cudnn();
  // Parameter gradients accumulate (beta = 1); the input gradient is overwritten.
  if (bias_ >= 0)
    KOLO_NN_CUDNN(cudnnConvolutionBackwardBias(h, &kOne, y_desc_.get(), dy.data(), &kOne, bias_desc_.get(),
                                               params_->grad(bias_)));
  KOLO_NN_CUDNN(cudnnSetConvolutionMathType(conv_desc_.get(), a.bwd_filter_math));
  KOLO_NN_CUDNN(cudnnConvolutionBackwardFilter(h, &kOne, x_desc_.get(), x.data(), y_desc_.get(), dy.data(),
                                               conv_desc_.get(), a.bwd_filter, ws, a.workspace, &kOne, w_desc_.get(),
                                               params_->grad(weight_)));
  if (dx) {
    dx->resize(x.shape());
    KOLO_NN_CUDNN(cudnnSetConvolutionMathType(conv_desc_.get(), a.bwd_data_math));
    KOLO_NN_CUDNN(cudnnConvolutionBackwardData(h, &kOne, w_desc_.get(), params_->value(weight_), y_desc_.get(),
                                               dy.data(), conv_desc_.get(), a.bwd_data, ws, a.workspace, &kZero,
                                               x_desc_.get(), dx->data()));
  }
}

}  // namespace kolo::nn::gpu

// nn/gpu/conv.h — 2-D convolution on cuDNN (the GPU twin of nn::Conv2d: NCHW, groups 1,
// weight [out, in, kh, kw], optional bias, same parameter names).
//
// Algorithms: for every batch size the layer meets (training, evaluation, a last short
// batch), the forward, backward-data and backward-filter algorithms are chosen ONCE by
// timing the candidates (cudnnFindConvolution*Algorithm) and cached with their math type
// and workspace size; if timing fails, cuDNN's heuristic (…_v7) picks. The workspace is
// the context's shared one (all layers run on one stream), grown to the largest need.
// Candidates needing more than kMaxWorkspaceBytes are skipped.
// Ownership/threads: see nn/gpu/layer.h.
#pragma once

#include <map>

#include "nn/conv.h"
#include "nn/gpu/cudnn_desc.h"
#include "nn/gpu/layer.h"

namespace kolo::nn::gpu {

class GpuConv2d : public GpuLayer {
 public:
  static constexpr size_t kMaxWorkspaceBytes = size_t{1} << 30;

  GpuConv2d(std::string name, ConvSpec spec) : GpuLayer(std::move(name)), spec_(spec) {}
  Dims setup(const Dims& in, GpuBuildContext& ctx) override;
  void forward(const DeviceTensor& x, DeviceTensor& y, bool train) override;
  void backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy, DeviceTensor* dx) override;

 private:
  struct Algos {
    cudnnConvolutionFwdAlgo_t fwd{};
    cudnnConvolutionBwdDataAlgo_t bwd_data{};
    cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
    cudnnMathType_t fwd_math{}, bwd_data_math{}, bwd_filter_math{};
    size_t workspace = 0;  // the largest of the three
  };
  // Sets the x/y descriptors for batch n and returns its algorithms (chosen on first use).
  const Algos& prepare(int n);
  Algos choose();

  ConvSpec spec_;
  int in_c_ = 0, in_h_ = 0, in_w_ = 0, out_h_ = 0, out_w_ = 0;
  int weight_ = -1, bias_ = -1;
  int desc_n_ = -1;  // batch size the x/y descriptors describe
  TensorDesc x_desc_, y_desc_, bias_desc_;
  FilterDesc w_desc_;
  ConvDesc conv_desc_;
  std::map<int, Algos> algos_;  // by batch size
};

}  // namespace kolo::nn::gpu

// nn/conv.h — 2-D convolution (cross-correlation, like PyTorch's Conv2d), NCHW, groups=1.
//
// Implementation: 3x3, stride-1, padding-1 convolutions whose channel counts are multiples
// of 4 (ResNet's body) run the direct kernels of nn/conv3x3.h (nn/conv_direct.cc). All
// others: im2col over a chunk of images, then one GEMM per chunk. Chunking several
// small images into one GEMM keeps the matrix wide enough for the kernel to run near peak
// (an 8x8 feature map alone gives a 64-column product), while bounding the column buffer
// so it stays in cache. A 1x1, stride-1, unpadded convolution skips im2col altogether.
// Weight layout [out, in, kh, kw]; bias optional (ResNets use none: BatchNorm follows).
// Ownership/threads: see nn/layer.h.
#pragma once

#include "nn/layer.h"

namespace kolo::nn {

struct ConvSpec {
  int out_channels = 0;
  int kernel = 3;
  int stride = 1;
  int padding = 0;
  bool bias = true;
};

class Conv2d : public Layer {
 public:
  Conv2d(std::string name, ConvSpec spec) : Layer(std::move(name)), spec_(spec) {}
  Dims setup(const Dims& in, BuildContext& ctx) override;
  void init(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  // Images per GEMM for this geometry.
  int chunk_images(int batch) const;
  bool pointwise() const;
  // Whether this geometry runs the direct 3x3 kernels (nn/conv_direct.cc).
  bool direct() const;
  // y (already sized) = convolution of x, without bias.
  void forward_im2col(const Tensor& x, Tensor& y);
  void forward_direct(const Tensor& x, Tensor& y);
  // Adds weight gradients, overwrites *dx (when given); bias gradient done by the caller.
  void backward_direct(const Tensor& x, const Tensor& dy, Tensor* dx);
  // col[K, nb*HW] for images [n0, n0+nb) of x.
  void im2col(const float* x, int nb, float* col) const;
  // dx[images] += col2im(dcol); dx must be zeroed by the caller.
  void col2im(const float* dcol, int nb, float* dx) const;
  // The traversal im2col and col2im share: fn(const Tap&) for every (input channel, kernel
  // row, kernel column, image) of nb images, in column-matrix order (conv.cc).
  struct Tap;
  template <class Fn>
  void for_each_tap(int nb, Fn&& fn) const;

  ConvSpec spec_;
  int in_c_ = 0, in_h_ = 0, in_w_ = 0, out_h_ = 0, out_w_ = 0;
  int weight_ = -1, bias_ = -1;
  std::vector<float> col_, chunk_;  // scratch: columns; gathered output/gradient chunk
  // Direct path scratch: padded inputs, padded/widened output gradients, re-laid weights.
  std::vector<float> pad_x_, pad_dy_, wide_, wt_;
};

}  // namespace kolo::nn

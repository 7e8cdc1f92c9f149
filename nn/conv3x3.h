// nn/conv3x3.h — direct 3x3, stride-1, padding-1 convolution kernels for Conv2d.
//
// Why: ResNet's 3x3 convolutions over 16-64 channels on 32x32..8x8 planes are where the
// CPU trainer spends its time. im2col + GEMM copies every input value nine times and
// then packs it again inside the GEMM; these kernels read the (zero-padded) input planes
// directly and keep a 4-output-channel x 3-vector block of results in registers.
//
// Layout: planes are processed in "vector rows" of width wv = round_up(w, 8); columns
// [w, wv) are padding that the caller drops (outputs) or fills with zeros (gradients).
// A padded input plane is [h+2][wp] with wp = wv + 2, the image at row 1, column 1, and
// zeros everywhere else. Vectors are 8 floats (GCC vector extensions: AVX with
// -march=native, otherwise SSE or scalar code of the same meaning).
//
// The same forward kernel computes the input gradient: the gradient of a stride-1,
// pad-1 3x3 convolution is the convolution of the padded output gradient with the
// kernels flipped by 180 degrees and input/output channels swapped (see flip_weights).
// Thread safety: pure functions over caller-owned buffers.
#pragma once

#include <cstdint>

namespace kolo::nn::conv3x3 {

// Plane geometry shared by the kernels.
struct Plane {
  int h = 0, w = 0;
  int wv() const { return (w + 7) / 8 * 8; }
  int wp() const { return wv() + 2; }
  int64_t padded_size() const { return int64_t{h + 2} * wp(); }  // floats per padded plane
  int64_t vec_size() const { return int64_t{h} * wv(); }          // floats per vector plane
};

// Channel counts the kernels handle (output channels come in blocks of 4).
inline bool supports(int in_c, int out_c) { return in_c % 4 == 0 && out_c % 4 == 0; }

// dst[c][h+2][wp] = src[c][h][w] (contiguous planes) with a zero border.
void pad_planes(const float* src, int channels, const Plane& p, float* dst);
// dst[c][h][wv] = src[c][h][w] with zero columns [w, wv).
void widen_planes(const float* src, int channels, const Plane& p, float* dst);
// dst[c][h][w] = src[c][h][wv] (drops the padding columns).
void narrow_planes(const float* src, int channels, const Plane& p, float* dst);

// Kernel layouts. Conv2d weights are [out][in][3][3]:
//   forward_weights: wt[(ci*9 + t)*out_c + co] = w[co][ci][t]
//   flip_weights:    wt[(co*9 + t)*in_c + ci]  = w[co][ci][8 - t]   (for the input gradient)
void forward_weights(const float* w, int out_c, int in_c, float* wt);
void flip_weights(const float* w, int out_c, int in_c, float* wt);

// out[co][h][wv] = sum_{ci,kh,kw} wt[(ci*9 + kh*3 + kw)*out_c + co] * xp[ci][oh+kh][ow+kw]
// xp: in_c padded planes. REQUIRES: out_c % 4 == 0.
void convolve(const float* xp, int in_c, const float* wt, int out_c, const Plane& p, float* out);

// dw[co][ci][kh][kw] += sum over images n < images, oh, ow < wv of
//   dy[n][co][oh][ow] * xp[n][ci][oh+kh][ow+kw]
// xp: per image in_c padded planes, image stride xp_image; dy: per image out_c vector
// planes (zero in columns [w, wv)), image stride dy_image. REQUIRES: out_c % 4 == 0.
void weight_gradient(const float* xp, int64_t xp_image, const float* dy, int64_t dy_image,
                     int images, int in_c, int out_c, const Plane& p, float* dw);

}  // namespace kolo::nn::conv3x3

// Direct 3x3 convolution kernels: register-blocked over 4 output channels x 3 vectors of
// 8 columns (12 accumulators), reading padded planes with unaligned vector loads.
#include "nn/conv3x3.h"

#include <algorithm>
#include <cstring>

#include "nn/simd.h"

namespace kolo::nn::conv3x3 {
namespace {

using simd::hsum;
using simd::in_register;
using simd::load;
using simd::store;
using simd::v8;

constexpr int kCo = 4;  // output channels per register block

// V output vectors (at padded-plane offsets xoff[v], vector-plane offsets ooff[v]) for
// output channels [co0, co0+4).
template <int V>
void block(const float* xp, int in_c, const float* wt, int out_c, int co0, const Plane& p,
           const int64_t* xoff, const int64_t* ooff, float* out) {
  v8 acc[kCo][V] = {};
  const int64_t in_plane = p.padded_size();
  const int wp = p.wp();
  for (int ci = 0; ci < in_c; ++ci) {
    const float* xc = xp + ci * in_plane;
    const float* wc = wt + int64_t{ci} * 9 * out_c + co0;
    for (int kh = 0; kh < 3; ++kh) {
      for (int kw = 0; kw < 3; ++kw) {
        const float* wk = wc + (kh * 3 + kw) * out_c;
        const int64_t shift = int64_t{kh} * wp + kw;
        v8 x[V];
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) {
          x[v] = load(xc + xoff[v] + shift);
          in_register(x[v]);
        }
#pragma GCC unroll 4
        for (int c = 0; c < kCo; ++c) {
          const float wv = wk[c];
#pragma GCC unroll 4
          for (int v = 0; v < V; ++v) acc[c][v] += x[v] * wv;
        }
      }
    }
  }
  const int64_t out_plane = p.vec_size();
  for (int c = 0; c < kCo; ++c) {
    for (int v = 0; v < V; ++v) store(out + (co0 + c) * out_plane + ooff[v], acc[c][v]);
  }
}

}  // namespace

void pad_planes(const float* src, int channels, const Plane& p, float* dst) {
  const int wp = p.wp();
  for (int c = 0; c < channels; ++c) {
    float* d = dst + c * p.padded_size();
    const float* s = src + int64_t{c} * p.h * p.w;
    std::fill(d, d + wp, 0.0f);
    for (int i = 0; i < p.h; ++i) {
      float* row = d + int64_t{i + 1} * wp;
      row[0] = 0.0f;
      std::memcpy(row + 1, s + int64_t{i} * p.w, sizeof(float) * p.w);
      std::fill(row + 1 + p.w, row + wp, 0.0f);
    }
    std::fill(d + int64_t{p.h + 1} * wp, d + p.padded_size(), 0.0f);
  }
}

void widen_planes(const float* src, int channels, const Plane& p, float* dst) {
  const int wv = p.wv();
  for (int64_t r = 0, rows = int64_t{channels} * p.h; r < rows; ++r) {
    std::memcpy(dst + r * wv, src + r * p.w, sizeof(float) * p.w);
    std::fill(dst + r * wv + p.w, dst + (r + 1) * wv, 0.0f);
  }
}

void narrow_planes(const float* src, int channels, const Plane& p, float* dst) {
  const int wv = p.wv();
  for (int64_t r = 0, rows = int64_t{channels} * p.h; r < rows; ++r) {
    std::memcpy(dst + r * p.w, src + r * wv, sizeof(float) * p.w);
  }
}

void forward_weights(const float* w, int out_c, int in_c, float* wt) {
  for (int co = 0; co < out_c; ++co)
    for (int ci = 0; ci < in_c; ++ci)
      for (int t = 0; t < 9; ++t) wt[(int64_t{ci} * 9 + t) * out_c + co] = w[(int64_t{co} * in_c + ci) * 9 + t];
}

void flip_weights(const float* w, int out_c, int in_c, float* wt) {
  for (int co = 0; co < out_c; ++co)
    for (int ci = 0; ci < in_c; ++ci)
      for (int t = 0; t < 9; ++t) wt[(int64_t{co} * 9 + t) * in_c + ci] = w[(int64_t{co} * in_c + ci) * 9 + 8 - t];
}

void convolve(const float* xp, int in_c, const float* wt, int out_c, const Plane& p, float* out) {
  const int per_row = p.wv() / 8, n = p.h * per_row;
  for (int co0 = 0; co0 < out_c; co0 += kCo) {
    int k = 0;
    int64_t xoff[3], ooff[3];
    auto offsets = [&](int count) {
      for (int v = 0; v < count; ++v) {
        const int oh = (k + v) / per_row, j = (k + v) % per_row;
        xoff[v] = int64_t{oh} * p.wp() + 8 * j;
        ooff[v] = int64_t{oh} * p.wv() + 8 * j;
      }
    };
    for (; k + 3 <= n; k += 3) {
      offsets(3);
      block<3>(xp, in_c, wt, out_c, co0, p, xoff, ooff, out);
    }
    if (n - k == 2) {
      offsets(2);
      block<2>(xp, in_c, wt, out_c, co0, p, xoff, ooff, out);
    } else if (n - k == 1) {
      offsets(1);
      block<1>(xp, in_c, wt, out_c, co0, p, xoff, ooff, out);
    }
  }
}

void weight_gradient(const float* xp, int64_t xp_image, const float* dy, int64_t dy_image,
                     int images, int in_c, int out_c, const Plane& p, float* dw) {
  const int wp = p.wp(), wv = p.wv();
  const int64_t in_plane = p.padded_size(), out_plane = p.vec_size();
  for (int co0 = 0; co0 < out_c; co0 += kCo) {
    for (int ci = 0; ci < in_c; ++ci) {
      for (int kh = 0; kh < 3; ++kh) {
        v8 acc[kCo][3] = {};
        for (int n = 0; n < images; ++n) {
          const float* xr = xp + n * xp_image + ci * in_plane + int64_t{kh} * wp;
          const float* g = dy + n * dy_image + co0 * out_plane;
          for (int oh = 0; oh < p.h; ++oh) {
            for (int j = 0; j < wv; j += 8) {
              const float* xv = xr + int64_t{oh} * wp + j;
              v8 x0 = load(xv), x1 = load(xv + 1), x2 = load(xv + 2);
              in_register(x0);
              in_register(x1);
              in_register(x2);
              const int64_t o = int64_t{oh} * wv + j;
#pragma GCC unroll 4
              for (int c = 0; c < kCo; ++c) {
                v8 gv = load(g + c * out_plane + o);
                in_register(gv);
                acc[c][0] += gv * x0;
                acc[c][1] += gv * x1;
                acc[c][2] += gv * x2;
              }
            }
          }
        }
        for (int c = 0; c < kCo; ++c) {
          float* d = dw + ((int64_t{co0 + c} * in_c + ci) * 9 + kh * 3);
          for (int kw = 0; kw < 3; ++kw) d[kw] += hsum(acc[c][kw]);
        }
      }
    }
  }
}

}  // namespace kolo::nn::conv3x3

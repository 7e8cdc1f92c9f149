// The GPU trainer's element-wise, loss and optimizer kernels.
#include "nn/gpu/kernels.h"

#include <cfloat>

#include "nn/gpu/context.h"

namespace kolo::nn::gpu {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? (b < 1 ? 1 : b) : 65535 * 16);
}

// Grid-stride loop over n elements applying f(i).
template <class F>
__global__ void each(int64_t n, F f) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) f(i);
}

template <class F>
void launch_each(int64_t n, cudaStream_t stream, F f) {
  if (n <= 0) return;
  each<<<blocks_for(n), kThreads, 0, stream>>>(n, f);
  KOLO_NN_CUDA(cudaGetLastError());
}

// One block per row of [n, k]: max, sum of exponentials, loss, gradient, argmax.
__global__ void softmax_xent_rows(const float* logits, const int32_t* labels, int n, int k, float* grad,
                                  float* row_stats) {
  __shared__ float red[kThreads];
  __shared__ int arg[kThreads];
  const int row = blockIdx.x;
  const float* z = logits + int64_t{row} * k;
  float best = -FLT_MAX;
  int best_j = k;
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    if (z[j] > best || (z[j] == best && j < best_j)) {
      best = z[j];
      best_j = j;
    }
  }
  red[threadIdx.x] = best;
  arg[threadIdx.x] = best_j;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) {
      const float o = red[threadIdx.x + s];
      const int oj = arg[threadIdx.x + s];
      if (o > red[threadIdx.x] || (o == red[threadIdx.x] && oj < arg[threadIdx.x])) {
        red[threadIdx.x] = o;
        arg[threadIdx.x] = oj;
      }
    }
    __syncthreads();
  }
  const float zmax = red[0];
  const int argmax = arg[0];
  __syncthreads();
  float sum = 0.0f;
  for (int j = threadIdx.x; j < k; j += blockDim.x) sum += expf(z[j] - zmax);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float total = red[0];
  const int label = labels[row];
  float* g = grad + int64_t{row} * k;
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    const float p = expf(z[j] - zmax) / total;
    g[j] = (p - (j == label ? 1.0f : 0.0f)) / static_cast<float>(n);
  }
  if (threadIdx.x == 0) {
    row_stats[2 * row] = logf(total) - (z[label] - zmax);
    row_stats[2 * row + 1] = argmax == label ? 1.0f : 0.0f;
  }
}

}  // namespace

void residual_relu(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
  launch_each(n, stream, [=] __device__(int64_t i) { y[i] = fmaxf(a[i] + b[i], 0.0f); });
}

void relu_mask(const float* y, const float* dy, float* d, int64_t n, cudaStream_t stream) {
  launch_each(n, stream, [=] __device__(int64_t i) { d[i] = y[i] > 0.0f ? dy[i] : 0.0f; });
}

void add_inplace(float* dst, const float* src, int64_t n, cudaStream_t stream) {
  launch_each(n, stream, [=] __device__(int64_t i) { dst[i] += src[i]; });
}

void scale_inplace(float* dst, int64_t n, float factor, cudaStream_t stream) {
  launch_each(n, stream, [=] __device__(int64_t i) { dst[i] *= factor; });
}

void add_bias_rows(float* y, const float* bias, int rows, int cols, cudaStream_t stream) {
  launch_each(int64_t{rows} * cols, stream, [=] __device__(int64_t i) { y[i] += bias[i % cols]; });
}

void bias_grad_rows(const float* dy, float* dbias, int rows, int cols, cudaStream_t stream) {
  // One thread per column: rows are few (a batch), columns are a layer's outputs.
  launch_each(cols, stream, [=] __device__(int64_t c) {
    float s = 0.0f;
    for (int r = 0; r < rows; ++r) s += dy[int64_t{r} * cols + c];
    dbias[c] += s;
  });
}

void softmax_xent(const float* logits, const int32_t* labels, int n, int k, float* grad, float* row_stats,
                  cudaStream_t stream) {
  if (n <= 0) return;
  softmax_xent_rows<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(logits, labels, n, k, grad, row_stats);
  KOLO_NN_CUDA(cudaGetLastError());
}

void sgd_update(float* p, const float* g, float* buf, int64_t n, const SgdStep& s, cudaStream_t stream) {
  const float lr = s.lr, wd = s.weight_decay, mu = s.momentum;
  if (buf == nullptr) {
    launch_each(n, stream, [=] __device__(int64_t i) { p[i] -= lr * (g[i] + wd * p[i]); });
  } else if (s.nesterov) {
    launch_each(n, stream, [=] __device__(int64_t i) {
      const float gi = g[i] + wd * p[i];
      buf[i] = mu * buf[i] + gi;
      p[i] -= lr * (gi + mu * buf[i]);
    });
  } else {
    launch_each(n, stream, [=] __device__(int64_t i) {
      buf[i] = mu * buf[i] + g[i] + wd * p[i];
      p[i] -= lr * buf[i];
    });
  }
}

void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamStep& s, cudaStream_t stream) {
  const AdamStep a = s;
  launch_each(n, stream, [=] __device__(int64_t i) {
    float gi = g[i];
    if (a.decoupled) p[i] -= a.lr * a.weight_decay * p[i];
    else gi += a.weight_decay * p[i];
    m[i] = a.beta1 * m[i] + (1.0f - a.beta1) * gi;
    v[i] = a.beta2 * v[i] + (1.0f - a.beta2) * gi * gi;
    p[i] -= a.lr * (m[i] * a.c1) / (sqrtf(v[i] * a.c2) + a.eps);
  });
}

}  // namespace kolo::nn::gpu

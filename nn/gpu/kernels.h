// nn/gpu/kernels.h — the GPU trainer's own CUDA kernels, behind plain host launchers: the
// element-wise pieces cuDNN/cuBLAS do not provide (residual sum + ReLU and its backward,
// bias rows of a linear layer and their gradient), softmax cross-entropy, and the
// optimizer updates (same formulas, in fp32, as optimizer/optimizer.cc).
//
// Each launcher enqueues on `stream`, never synchronizes, and throws std::runtime_error
// when the launch fails. All pointers are device memory of the current device.
// Thread safety: launchers may be called from any thread; ordering is the stream's.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kolo::nn::gpu {

// y = max(a + b, 0)
void residual_relu(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);
// d = y > 0 ? dy : 0
void relu_mask(const float* y, const float* dy, float* d, int64_t n, cudaStream_t stream);
// dst += src
void add_inplace(float* dst, const float* src, int64_t n, cudaStream_t stream);
// dst *= factor
void scale_inplace(float* dst, int64_t n, float factor, cudaStream_t stream);
// y[r, c] += bias[c] for a row-major [rows, cols] matrix.
void add_bias_rows(float* y, const float* bias, int rows, int cols, cudaStream_t stream);
// dbias[c] += sum over r of dy[r, c].
void bias_grad_rows(const float* dy, float* dbias, int rows, int cols, cudaStream_t stream);

// Softmax cross-entropy over logits [n, k] with labels in [0, k) (checked on the host by
// the caller). Writes grad = (softmax - onehot) / n, and per row its loss and whether its
// argmax (first maximum) equals the label, as floats in row_stats[2*i], row_stats[2*i+1].
void softmax_xent(const float* logits, const int32_t* labels, int n, int k, float* grad, float* row_stats,
                  cudaStream_t stream);

struct SgdStep {
  float lr = 0, weight_decay = 0, momentum = 0;
  bool nesterov = false;
};
// PyTorch SGD over n values; `buf` (momentum) may be null when momentum == 0.
void sgd_update(float* p, const float* g, float* buf, int64_t n, const SgdStep& s, cudaStream_t stream);

struct AdamStep {
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  float c1 = 1, c2 = 1;  // bias corrections 1/(1-beta^t)
  bool decoupled = false;
};
void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamStep& s, cudaStream_t stream);

}  // namespace kolo::nn::gpu

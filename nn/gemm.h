// nn/gemm.h — the one matrix-multiply entry point of the CPU trainer (Eigen underneath).
//
// All matrices are row-major with an explicit leading dimension (elements between rows),
// BLAS-style, so callers can multiply sub-blocks of larger buffers without copies:
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C      (beta 0 or 1)
// op(X) is X or X^T per trans_a / trans_b. Eigen's thread count (set_num_threads) applies.
// Thread safety: reentrant; Eigen may use its own worker threads inside one call.
#pragma once

namespace kolo::nn {

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc);

// Threads Eigen may use inside one product (OpenMP builds); 1 until set otherwise.
void set_num_threads(int n);
int num_threads();

}  // namespace kolo::nn

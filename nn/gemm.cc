// gemm(): Eigen maps over row-major buffers with a leading dimension.
#include "nn/gemm.h"

#include <Eigen/Core>
#include <stdexcept>
#include <string>

namespace kolo::nn {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
using Map = Eigen::Map<RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;

template <class L, class R>
void assign(Map& c, const L& l, const R& r, float alpha, float beta) {
  if (beta == 0.0f) {
    if (alpha == 1.0f) c.noalias() = l * r;
    else c.noalias() = alpha * (l * r);
  } else {
    if (alpha == 1.0f) c.noalias() += l * r;
    else c.noalias() += alpha * (l * r);
  }
}

// One thread unless set_num_threads() says otherwise: under mpirun every rank is a
// process of its own, and OpenMP's default (all cores per process) oversubscribes the
// machine — spinning OpenMP barriers then cost far more than the parallel product gains.
const bool kSingleThreadedByDefault = [] {
  Eigen::setNbThreads(1);
  return true;
}();

}  // namespace

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  if (beta != 0.0f && beta != 1.0f) throw std::invalid_argument("gemm: beta must be 0 or 1");
  if (m == 0 || n == 0) return;
  Map cm(c, m, n, Eigen::OuterStride<>(ldc));
  if (k == 0) {
    if (beta == 0.0f) cm.setZero();
    return;
  }
  // The stored shape of A is [m,k] or, transposed, [k,m]; likewise B.
  ConstMap am(a, trans_a ? k : m, trans_a ? m : k, Eigen::OuterStride<>(lda));
  ConstMap bm(b, trans_b ? n : k, trans_b ? k : n, Eigen::OuterStride<>(ldb));
  if (!trans_a && !trans_b) assign(cm, am, bm, alpha, beta);
  else if (trans_a && !trans_b) assign(cm, am.transpose(), bm, alpha, beta);
  else if (!trans_a && trans_b) assign(cm, am, bm.transpose(), alpha, beta);
  else assign(cm, am.transpose(), bm.transpose(), alpha, beta);
}

void set_num_threads(int n) {
  if (n < 1) throw std::invalid_argument("thread count must be >= 1, got " + std::to_string(n));
  Eigen::setNbThreads(n);
}

int num_threads() { return Eigen::nbThreads(); }

}  // namespace kolo::nn

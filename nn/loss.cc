// Numerically stable softmax cross-entropy (log-sum-exp with the row maximum subtracted).
#include "nn/loss.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace kolo::nn {

LossResult SoftmaxCrossEntropy::forward(const Tensor& logits, const int32_t* labels) {
  const int n = logits.dim(0), k = logits.dim(1);
  grad_.resize(logits.shape());
  LossResult r;
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    const int32_t label = labels[i];
    if (label < 0 || label >= k) {
      throw std::invalid_argument("label " + std::to_string(label) + " of sample " +
                                  std::to_string(i) + " is outside [0," + std::to_string(k) + ")");
    }
    const float* z = logits.data() + int64_t{i} * k;
    float* g = grad_.data() + int64_t{i} * k;
    const int best = static_cast<int>(std::max_element(z, z + k) - z);
    const float zmax = z[best];
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += std::exp(static_cast<double>(z[j] - zmax));
    total += std::log(sum) - (z[label] - zmax);
    for (int j = 0; j < k; ++j) {
      const double p = std::exp(static_cast<double>(z[j] - zmax)) / sum;
      g[j] = static_cast<float>((p - (j == label ? 1.0 : 0.0)) / n);
    }
    if (best == label) ++r.correct;
  }
  r.loss = n > 0 ? total / n : 0.0;
  return r;
}

int count_correct(const Tensor& logits, const int32_t* labels) {
  const int n = logits.dim(0), k = logits.dim(1);
  int correct = 0;
  for (int i = 0; i < n; ++i) {
    const float* z = logits.data() + int64_t{i} * k;
    if (std::max_element(z, z + k) - z == labels[i]) ++correct;
  }
  return correct;
}

}  // namespace kolo::nn

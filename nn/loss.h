// nn/loss.h — softmax cross-entropy over logits [N, K] with integer labels.
//
// forward() returns the mean loss over the batch and the number of correct top-1
// predictions, and keeps d(mean loss)/d(logits) = (softmax - onehot) / N for grad().
// Thread safety: none (holds the gradient of the latest call).
#pragma once

#include <cstdint>

#include "nn/tensor.h"

namespace kolo::nn {

struct LossResult {
  double loss = 0.0;  // mean over the batch
  int correct = 0;    // argmax(logits) == label
};

class SoftmaxCrossEntropy {
 public:
  // labels: N values in [0, K); throws std::invalid_argument naming the first bad one.
  LossResult forward(const Tensor& logits, const int32_t* labels);
  const Tensor& grad() const { return grad_; }

 private:
  Tensor grad_;
};

// Number of rows of `logits` whose argmax equals the label (evaluation without a loss).
int count_correct(const Tensor& logits, const int32_t* labels);

}  // namespace kolo::nn

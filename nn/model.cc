// Model construction (setup, allocation, initialisation) and the reporting backward pass.
#include "nn/model.h"

#include <algorithm>
#include <stdexcept>

namespace kolo::nn {

Model::Model(std::string arch, Dims input, Chain layers, uint64_t seed)
    : arch_(std::move(arch)),
      input_(std::move(input)),
      params_(std::make_unique<ParamStore>(true)),
      buffers_(std::make_unique<ParamStore>(false)),
      rng_(std::make_unique<Rng>(seed ^ 0x9e3779b97f4a7c15ULL)),
      layers_(std::move(layers)) {
  BuildContext ctx{params_.get(), buffers_.get(), rng_.get(), ""};
  output_ = layers_.setup(input_, ctx);
  params_->finalize();
  buffers_->finalize();
  Rng init_rng(seed);
  layers_.init(init_rng);
}

const Tensor& Model::forward(const Tensor& x, bool train) {
  if (x.rank() != input_.size() + 1 ||
      !std::equal(input_.begin(), input_.end(), x.shape().begin() + 1)) {
    throw std::invalid_argument(arch_ + ": input " + dims_string(x.shape()) +
                                " does not match the model's per-sample shape " +
                                dims_string(input_));
  }
  return layers_.forward(x, train);
}

void Model::backward(const Tensor& x, const Tensor& dlogits, const GradReadyFn& ready) {
  layers_.backward(x, dlogits, nullptr, ready);
}

}  // namespace kolo::nn

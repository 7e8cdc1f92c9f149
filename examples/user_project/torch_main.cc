// A LibTorch program outside kolo's tree, built against the installed package
// (find_package(kolo COMPONENTS torch)): one data-parallel SGD step with
// kolo::torch::DistributedOptimizer; every rank must end with the same parameters.
#include <cstdio>

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <kolo/kolo.h>
#include <kolo/torch.h>

int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  torch::manual_seed(static_cast<uint64_t>(kolo::rank()));
  torch::nn::Linear model(4, 2);
  kolo::torch::broadcast_parameters(*model, 0);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1));
  kolo::torch::DistributedOptimizer opt(sgd, model->named_parameters());
  opt.zero_grad();
  model->forward(at::full({3, 4}, kolo::rank() + 1.0)).sum().backward();  // different data per rank
  opt.step();
  bool ok = true;
  for (const auto& p : model->named_parameters()) {
    at::Tensor hi = p.value().detach().clone(), lo = hi.clone();
    kolo::torch::allreduce(hi, "user.max." + p.key(), {kolo::ReduceOp::kMax});
    kolo::torch::allreduce(lo, "user.min." + p.key(), {kolo::ReduceOp::kMin});
    ok = ok && at::equal(hi, lo);
  }
  std::printf("user_torch_app rank %d of %d: %s\n", kolo::rank(), kolo::size(), ok ? "OK" : "WRONG");
  kolo::shutdown();
  return ok ? 0 : 1;
}

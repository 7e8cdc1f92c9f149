// kolo/torch.h — kolo for LibTorch (C++): collectives on torch tensors, a DistributedOptimizer
// that wraps any torch::optim::Optimizer, and the start-of-training broadcasts. Library
// kolo::torch (built when CMake finds LibTorch; find_package(kolo COMPONENTS torch)).
//
//   kolo::init(&argc, &argv);
//   auto model = MyNet();                      // a torch::nn::Module
//   torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
//   kolo::torch::broadcast_parameters(*model, 0);
//   kolo::torch::broadcast_optimizer_state(sgd, 0);
//   kolo::torch::DistributedOptimizer opt(sgd, model->named_parameters());
//   for each batch: opt.zero_grad(); loss = ...; loss.backward(); opt.step();
//
// The DistributedOptimizer is a client of kolo::GradientSync (kolo/gradient_sync.h): it
// puts a post-hook on every parameter's gradient accumulator (the autograd node that adds
// into .grad), so each gradient's allreduce (average by default) is submitted the moment
// backward has finished it, while backward goes on with the earlier layers; step() waits
// for all of them and runs the wrapped optimizer. Semantics follow horovod.torch:
// backward_passes_per_step = k means step() after k backward passes (gradients accumulate
// in .grad; divide the loss by k, or set average_over_passes); synchronize() may be called
// before step() (to clip gradients, say) and step() then does not reduce again;
// skip_synchronize() is the explicit form. A parameter that received no gradient still
// takes part (its .grad becomes zeros first), as every rank must reduce the same tensors.
//
// Collective names: gradients "grad.<parameter name>" (name_prefix + name); parameter
// broadcasts "bcast.param.<name>" / "bcast.buffer.<name>"; optimizer state
// "bcast.optim.<group>.<index>.<field>". Every rank must use the same names.
//
// Tensors: every dtype kolo has (uint8, int32, int64, float16, bfloat16, float32, float64);
// others throw kolo::Error naming the tensor. CPU tensors; CUDA tensors go to kolo's GPU
// executors when kolo was built with CUDA (they wait for LibTorch's legacy default stream
// through an event; work queued on other streams must be synchronised by the caller).
// Asynchronous calls need contiguous tensors; the blocking ones also take non-contiguous
// tensors (through a contiguous copy).
//
// Ownership: an async collective's tensor (its storage) must stay alive and untouched until
// its Handle completes. The DistributedOptimizer refers to the wrapped optimizer and its
// parameters (they must outlive it); it owns its hooks and removes them when destroyed,
// after waiting for its allreduces.
// Threads: collectives from any thread. The DistributedOptimizer's hooks run on autograd's
// threads; its other members belong to the training thread, one call at a time.
// Errors: kolo::Error (kolo/status.h) with kolo's message: a failed gradient allreduce
// surfaces from step()/synchronize() naming the tensor.
// REQUIRES: kolo::init() before any call.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/ordered_dict.h>

#include "kolo/collectives.h"
#include "kolo/gradient_sync.h"
#include "kolo/handle.h"

namespace torch {
namespace optim {
class Optimizer;
}
namespace nn {
class Module;
}
namespace autograd {
struct Node;
}
}  // namespace torch

namespace kolo::torch {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// kolo's element type of a torch scalar type; throws kolo::Error (naming `what`) for
// types kolo does not reduce (bool, int8, int16, complex, ...).
DType dtype_of(c10::ScalarType type, const std::string& what);
// A view of `t`'s memory (contiguous, CPU or CUDA); throws kolo::Error naming `what`.
TensorView view_of(const at::Tensor& t, const std::string& what);

// In place. The async forms need contiguous tensors (see Ownership).
Handle allreduce_async(const at::Tensor& t, const std::string& name, const AllreduceOptions& options = {});
void allreduce(const at::Tensor& t, const std::string& name, const AllreduceOptions& options = {});
Handle broadcast_async(const at::Tensor& t, int root, const std::string& name);
void broadcast(const at::Tensor& t, int root, const std::string& name);
// Concatenation of every rank's `t` along dimension 0 (sizes may differ there), on t's device.
at::Tensor allgather(const at::Tensor& t, const std::string& name);

// Copies root's values of a module's parameters and buffers (recursively) to every rank.
void broadcast_parameters(const ::torch::nn::Module& module, int root);
// The same for named tensors (a module's named_parameters(), or a list built by hand).
void broadcast_parameters(const NamedTensors& tensors, int root, const std::string& prefix = "bcast.param.");
// Copies root's optimizer state to every rank: per-parameter state (SGD momentum buffers;
// Adam/AdamW moments, max moments and step counts; Adagrad sums; RMSprop averages) created
// or dropped where it differs from root's, and each parameter group's learning rate.
// Supports SGD, Adam, AdamW, Adagrad, RMSprop; throws kolo::Error for others. The
// optimizers must hold the same parameters (shapes) in the same order on every rank.
void broadcast_optimizer_state(::torch::optim::Optimizer& optimizer, int root);

class DistributedOptimizer {
 public:
  // Wraps `optimizer`. Every parameter of it that requires grad must appear in
  // `named_parameters` (its name makes the collective's name); with an empty list the names
  // are "<group>.<index>". Throws kolo::Error for an unnamed parameter, a name given twice,
  // or invalid options.
  DistributedOptimizer(::torch::optim::Optimizer& optimizer, const NamedTensors& named_parameters,
                       GradientSyncOptions options = {});
  DistributedOptimizer(::torch::optim::Optimizer& optimizer,
                       const ::torch::OrderedDict<std::string, at::Tensor>& named_parameters,
                       GradientSyncOptions options = {});
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  // Reduces the gradients (unless synchronize() already did since the last backward, or a
  // SkipSynchronize guard is alive), then runs the wrapped optimizer's step.
  void step();
  // Submits what backward did not, waits for every gradient's allreduce.
  void synchronize();
  void zero_grad();

  // While alive, step() does not synchronize (Horovod's `with opt.skip_synchronize():`).
  class SkipSynchronize {
   public:
    explicit SkipSynchronize(DistributedOptimizer& o) : o_(o) { o_.skip_ = true; }
    ~SkipSynchronize() { o_.skip_ = false; }
    SkipSynchronize(const SkipSynchronize&) = delete;
    SkipSynchronize& operator=(const SkipSynchronize&) = delete;

   private:
    DistributedOptimizer& o_;
  };

  ::torch::optim::Optimizer& inner() { return optimizer_; }
  GradientSync& gradient_sync() { return sync_; }
  // Seconds the last synchronize() waited (communication that backward did not hide).
  double last_wait_seconds() const { return sync_.last_wait_seconds(); }

 private:
  void gradient_ready(int index);  // from the hooks
  struct Hooked {
    std::shared_ptr<::torch::autograd::Node> accumulator;
    uintptr_t key = 0;
  };

  ::torch::optim::Optimizer& optimizer_;
  std::vector<at::Tensor> params_;  // by GradientSync index
  std::vector<Hooked> hooks_;
  std::atomic<bool> synchronized_{false};  // no backward since the last synchronize()
  bool skip_ = false;
  GradientSync sync_;
  friend struct GradReadyHook;
};

}  // namespace kolo::torch

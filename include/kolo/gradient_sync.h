// kolo/gradient_sync.h — the framework-neutral core of data-parallel training: averaging
// (or otherwise reducing) a model's gradients across ranks while backward still runs.
//
// Every DistributedOptimizer in kolo is a thin client of this class: kolo's own trainer
// (optimizer/distributed_optimizer.h, nn/gpu/distributed.h), the LibTorch adapter
// (kolo/torch.h) and the Python module kolo.torch. A client
//   1. registers each gradient once, by name, with a TensorView of its memory;
//   2. calls gradient_ready(i) as soon as backward has finished writing gradient i (from a
//      hook); on the last of `backward_passes_per_step` passes this submits its allreduce
//      at once, so communication overlaps the rest of backward;
//   3. calls synchronize() before the optimizer's update: it submits every gradient not
//      submitted yet (a tensor that backward never reported still has to be reduced, or
//      the peers would wait for it), waits for all of them, decompresses, and starts the
//      next window.
//
//   kolo::GradientSync sync;  // options: average, no compression, one pass per step
//   int w = sync.register_gradient("fc.w", kolo::TensorView::of(grad_w, {out, in}));
//   ... backward, hook: sync.gradient_ready(w);
//   sync.synchronize();   // grad_w now holds the average over ranks
//
// Names: the collective of gradient `name` is called options.name_prefix + name; it must
// be the same on every rank, and every rank must register the same gradients (shape, dtype
// alike). Registration order need not agree; kolo negotiates by name.
//
// backward_passes_per_step = k: gradients accumulate in the caller's memory over k passes
// (the framework adds into the gradient buffer); gradient_ready is then called k times per
// window and submits on the k-th call. synchronize() ends the window whatever the counts
// (Horovod's rule: step() after k passes). Reporting a gradient a (k+1)-th time in one
// window throws. average_over_passes = true additionally multiplies by 1/k (so an update
// uses the mean over k passes; kolo's own trainer does this; Horovod's PyTorch optimizer
// does not, its users divide the loss instead — the default here is Horovod's).
//
// Scaling: the reduction is  postscale * op_r(prescale * g_r)  over ranks r (op Average
// divides the sum by the number of ranks). With average_over_passes the prescale is
// multiplied by 1/k.
//
// fp16 compression (Compression::kFp16): a float32/float64 CPU gradient is converted,
// already multiplied by the prescale (a sum of k passes could leave half's range), into a
// float16 buffer that this object owns, reduced as float16 (half the bytes), and converted
// back into the caller's memory by synchronize(). Other dtypes are reduced as they are.
// Compression of GPU gradients is not supported: submitting one throws.
//
// GPU gradients: a view with device = Device::gpu(n) is reduced by kolo's GPU executors
// (when kolo was built with CUDA); set view.ready_event to an event recorded after the
// producer's last write (before_submit is the place to record it).
//
// Ownership: the gradient memory is the caller's. From a gradient's submission until
// synchronize() returns (or this object is destroyed) it belongs to kolo: do not write,
// free or move it. The fp16 staging buffers belong to this object. The destructor waits
// for every allreduce still in flight (ignoring results), so destroy this object before
// the gradient memory.
// Errors: invalid use (empty or duplicate name, unknown index, too many reports, null
// memory at submission, compression of a GPU gradient) throws kolo::Error with an
// invalid-argument Status naming the gradient. A failed allreduce (mismatch across ranks,
// peer gone, ...) surfaces from synchronize() as kolo::Error naming the tensor, after
// every other allreduce of the window has been waited for; the next window starts clean.
// Threads: every member may be called from any thread (an internal mutex serialises
// them; synchronize() holds it while it waits, so gradient_ready from backward must not
// run concurrently with synchronize — it would wait until synchronize returns). The
// before_submit callback runs with that mutex held: it must not call into this object.
// REQUIRES: kolo::init() before the first submission.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kolo/process_set.h"
#include "kolo/tensor.h"
#include "kolo/types.h"

namespace kolo {

enum class Compression : uint8_t { kNone = 0, kFp16 = 1 };

struct GradientSyncOptions {
  ReduceOp op = ReduceOp::kAverage;
  double prescale = 1.0;
  double postscale = 1.0;
  Compression compression = Compression::kNone;
  int backward_passes_per_step = 1;  // >= 1
  bool average_over_passes = false;  // also multiply by 1 / backward_passes_per_step
  std::string name_prefix = "grad.";
  // The ranks the gradients are reduced over (kolo/process_set.h; default: every rank).
  // Only members may construct a GradientSync on a set (their submissions would fail).
  ProcessSet process_set{};
  // Optional: called right before gradient `index` is submitted (on the submitting thread,
  // mutex held) with its current view. kolo's trainer scales by a per-rank weight here; the
  // GPU trainer records the view's ready_event.
  std::function<void(int index, const TensorView& view)> before_submit;
};

class GradientSync {
 public:
  // Throws kolo::Error (invalid argument) when backward_passes_per_step < 1 or a scale
  // factor is not finite.
  explicit GradientSync(GradientSyncOptions options = {});
  ~GradientSync();  // waits for allreduces in flight (see Ownership)
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Adds a gradient and returns its index (0, 1, ... in registration order). `view` may
  // have null data while the memory does not exist yet (set it with set_view or
  // gradient_ready(i, view) before submission); its dtype, shape and device describe it.
  int register_gradient(const std::string& name, const TensorView& view);
  // Index of a registered name, or -1.
  int index_of(const std::string& name) const;
  int num_gradients() const;
  std::string name(int index) const;  // as registered (without the prefix)

  // The gradient's memory moved (a framework reallocated it). Throws while it is submitted.
  void set_view(int index, const TensorView& view);
  // Backward finished writing gradient `index` for this pass. On the window's k-th report
  // submits its allreduce. The second form first sets the view (as set_view).
  void gradient_ready(int index);
  void gradient_ready(int index, const TensorView& view);
  void gradient_ready(const std::string& name) { gradient_ready(checked_index(name)); }
  // The client reduces gradient `index` itself from now on (kolo.torch's sparse gradients,
  // reduced by an allgather of indices and values): synchronize() neither submits nor
  // waits for it, and reporting it ready throws. Throws while it is submitted.
  void set_external(int index);
  // True when gradient `index` was submitted in the current window.
  bool submitted(int index) const;
  // Reports of gradient `index` in the current window.
  int reports(int index) const;

  // Ends the window: submits the gradients not submitted yet, waits for all, decompresses,
  // and resets the counts. Throws kolo::Error naming the first failed tensor.
  void synchronize();
  // Waits for allreduces in flight, discards their results and resets the window (for
  // teardown or after a caller-side error). Never throws.
  void abandon();

  const GradientSyncOptions& options() const;
  // Seconds the last synchronize() spent waiting (communication backward did not hide).
  double last_wait_seconds() const;

 private:
  int checked_index(const std::string& name) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kolo

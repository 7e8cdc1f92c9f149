"""DistributedOptimizer: horovod.torch's optimizer wrapper over kolo.

DistributedOptimizer(optimizer, named_parameters=..., compression=..., backward_passes_per_step=...,
op=..., gradient_predivide_factor=...) returns an object of a subclass of the optimizer's own
class (isinstance holds, state_dict/load_state_dict/LR schedulers work) sharing its
param_groups. A hook on each parameter's gradient accumulator starts that gradient's
allreduce as soon as autograd has written it, so communication overlaps the rest of the
backward pass; step() waits for all of them (synchronize()) and then runs the optimizer.
The bookkeeping (which gradient was reported how often, submission, fp16 staging, waiting,
errors) is kolo's training core, kolo::GradientSync (kolo/gradient_sync.h), the same code
kolo's C++ trainer and LibTorch adapter use; this class only connects torch's hooks to it.

Semantics as Horovod's:
  * backward_passes_per_step = k: the allreduce of a gradient starts on the k-th backward
    pass after the last step; gradients of the k passes are summed by autograd (scale the
    loss by 1/k for a mean, as Horovod's examples do). A (k+1)-th pass before step() raises.
  * op=Average (default) divides by the number of ranks (gradient_predivide_factor f splits
    it: gradients are multiplied by 1/f before and f/size after the sum); op=Sum sums.
  * synchronize() may be called before step() (e.g. to clip gradients); then wrap step() in
    `with optimizer.skip_synchronize():`.
  * zero_grad() while allreduces are in flight raises (they still write the gradients).
  * Parameters whose hook did not fire (unused in this pass) are reduced in synchronize()
    (a zero gradient where they have none), so every rank submits the same set.
  * With one rank no hooks are registered and step() is the wrapped optimizer's step.
Gradient allreduces are named by the parameter names given (named_parameters), else
"allreduce.noname.<group>.<index>".
"""
import contextlib
import warnings

import torch

from kolo import _kolo
from kolo.torch import mpi_ops
from kolo.torch.compression import Compression
from kolo.torch.mpi_ops import Average, Sum, size
from kolo.torch.process_sets import _set_id


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 op=Average, gradient_predivide_factor=1.0, process_set=None, sparse_as_dense=False):
        super(self.__class__, self).__init__(params)
        self._process_set = process_set
        self.sparse_as_dense = bool(sparse_as_dense)
        self._compression = compression
        if op not in (Average, Sum) and op is not None:
            raise ValueError("DistributedOptimizer: op must be Average or Sum, got %r" % (op,))
        if gradient_predivide_factor != 1.0 and op != Average:
            raise ValueError("DistributedOptimizer: gradient_predivide_factor needs op=Average")
        self.op = Average if op is None else op
        self.gradient_predivide_factor = float(gradient_predivide_factor)
        if backward_passes_per_step < 1:
            raise ValueError("DistributedOptimizer: backward_passes_per_step must be >= 1, got %r"
                             % (backward_passes_per_step,))
        self.backward_passes_per_step = int(backward_passes_per_step)

        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [("allreduce.noname.%d.%d" % (i, j), v)
                                for i, group in enumerate(self.param_groups)
                                for j, v in enumerate(group["params"])]
        if any(not isinstance(p, tuple) or len(p) != 2 for p in named_parameters):
            raise ValueError("DistributedOptimizer: named_parameters must be (name, parameter) "
                             "pairs, e.g. model.named_parameters()")
        names = [k for k, _ in named_parameters]
        dups = sorted({k for k in names if names.count(k) > 1})
        if dups:
            raise ValueError("DistributedOptimizer: parameter names are not unique: %s" % ", ".join(dups))
        self._parameter_names = {v: k for k, v in named_parameters}
        all_params = {p for group in self.param_groups for p in group["params"]}
        unnamed = [p for p in all_params if p not in self._parameter_names]
        if unnamed:
            raise ValueError("DistributedOptimizer: named_parameters misses %d parameter(s) of the "
                             "optimizer; pass model.named_parameters() of the model the optimizer "
                             "was built from" % len(unnamed))

        self._sync = None
        self._index = {}         # parameter -> index in self._sync
        self._desc = {}          # parameter -> (dtype code, shape, device) its gradient has
        self._submitted = {}     # parameter -> its gradient tensor, while kolo may touch it
        self._sparse = {}        # parameter -> sparse_allreduce_async's wait function, this window
        self._dense_of_sparse = set()  # parameters whose sparse gradient travels dense (sparse_as_dense)
        # Parameters reduced sparsely (outside GradientSync) from their first sparse gradient on:
        # [sparse dimensions, reports this window].
        self._sparse_params = {}
        self._grad_accs = []
        self._synchronized = False
        self._should_synchronize = True
        if (size() if process_set is None else process_set.size()) > 1:
            if self.op == Average:
                # kolo applies the 1/size of Average after the sum.
                pre, post = 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
            else:
                pre, post = 1.0, 1.0
            fp16 = compression is Compression.fp16
            if not fp16 and compression is not Compression.none:
                raise ValueError("DistributedOptimizer: compression must be Compression.none or "
                                 "Compression.fp16")
            self._sync = _kolo.GradientSync(
                self.op, pre, post, _kolo.COMPRESSION_FP16 if fp16 else _kolo.COMPRESSION_NONE,
                self.backward_passes_per_step, False, "", _set_id(process_set))
            self._register_hooks()

    # -- hooks -----------------------------------------------------------------------------
    def _register_hooks(self):
        for group in self.param_groups:
            for p in group["params"]:
                if not p.requires_grad or p in self._index:
                    continue
                # torch keeps p.grad of p's dtype, shape and device: described once here.
                desc = (mpi_ops._dtype_code(p, "DistributedOptimizer"), list(p.shape),
                        mpi_ops._device(p) if p.is_cuda else -1)
                self._desc[p] = desc
                self._index[p] = self._sync.register_gradient(self._parameter_names[p], *desc)
                # The AccumulateGrad node of p: its hooks run once p.grad holds this pass's sum.
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(self._make_hook(p))
                self._grad_accs.append(acc)

    def _make_hook(self, p):
        i = self._index[p]
        code, shape, dev = self._desc[p]
        sync, submitted, k = self._sync, self._submitted, self.backward_passes_per_step

        def hook(*_):
            # Per gradient of every backward pass: kept to the few calls it needs.
            if sync.reports(i) >= k:
                raise AssertionError(
                    "Gradients were computed more than backward_passes_per_step (%d) times before "
                    "call to step(). Increase backward_passes_per_step to accumulate gradients "
                    "locally." % k)
            g = p.grad
            if g.is_sparse:
                g = self._sparse_ready(p, i, g)
                if g is None:
                    return
            if not g.is_contiguous():
                raise ValueError("DistributedOptimizer: the gradient of %s is not contiguous"
                                 % self._parameter_names[p])
            submitted[p] = g
            sync.gradient_ready(i, g.data_ptr(), code, shape, dev)
        return hook

    def _sparse_ready(self, p, i, g):
        """A sparse gradient (nn.Embedding(sparse=True)): with sparse_as_dense, a dense copy
        goes to the allreduce (and back to sparse in synchronize); otherwise it is reduced as
        Horovod does, by an allgather of indices and values, outside kolo's GradientSync.
        Returns the dense tensor to submit, or None."""
        if self.sparse_as_dense:
            self._dense_of_sparse.add(p)
            return g.to_dense()
        if p not in self._sparse_params:
            self._sync.set_external(i)
            self._sparse_params[p] = [g.sparse_dim(), 0]
        count = self._sparse_params[p]
        count[1] += 1  # autograd sums the passes into p.grad: submit on the k-th
        if count[1] > self.backward_passes_per_step:
            raise AssertionError("Gradients were computed more than backward_passes_per_step (%d) times "
                                 "before call to step()" % self.backward_passes_per_step)
        if count[1] == self.backward_passes_per_step:
            self._sparse[p] = self._sparse_allreduce(p, g)
        return None

    def _sparse_allreduce(self, p, g):
        return mpi_ops.sparse_allreduce_async(g, name="sparse." + self._parameter_names[p], op=self.op,
                                              process_set=self._process_set)

    def _finish_sparse(self):
        """Waits for the sparse reductions; a parameter reduced sparsely before whose hook did
        not fire this window sends no rows (every rank takes part)."""
        for p, count in self._sparse_params.items():
            count[1] = 0
            if p not in self._sparse:
                g = p.grad if p.grad is not None and p.grad.is_sparse else torch.sparse_coo_tensor(
                    torch.zeros(count[0], 0, dtype=torch.int64), torch.zeros((0,) + p.shape[count[0]:], dtype=p.dtype),
                    p.shape)
                self._sparse[p] = self._sparse_allreduce(p, g)
        first = None
        for p, wait in self._sparse.items():
            try:
                p.grad = wait()
            except Exception as e:  # noqa: BLE001 -- re-raised after all completed
                first = first or e
        self._sparse.clear()
        if first is not None:
            raise first

    # -- public ----------------------------------------------------------------------------
    def synchronize(self):
        """Waits for every gradient's allreduce (starting those not started yet) and leaves
        the results in p.grad. Raises KoloError (after all completed) if any failed."""
        if self._sync is None:
            self._synchronized = True
            return
        for p, i in self._index.items():
            if p in self._sparse_params or p in self._sparse:
                continue
            if not self._sync.submitted(i):
                # No (or not enough) hook calls: reduce what there is, a zero gradient if none,
                # so that every rank submits the same set.
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                elif p.grad.is_sparse:  # sparse_as_dense, and the hook did not fire
                    self._dense_of_sparse.add(p)
                    p.grad = p.grad.to_dense()
                g = p.grad
                self._submitted[p] = g
                self._sync.set_view(i, g.data_ptr(), mpi_ops._dtype_code(g, "DistributedOptimizer"),
                                    list(g.shape), mpi_ops._device(g) if g.is_cuda else -1)
        try:
            try:
                self._sync.synchronize()
            finally:
                self._finish_sparse()
            for p in self._dense_of_sparse:
                # The reduced dense copy, back to sparse for the optimizer (SparseAdam), as Horovod.
                p.grad = self._submitted[p].to_sparse()
        finally:
            self._dense_of_sparse.clear()
            self._submitted.clear()
            self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside this block does not synchronize (call synchronize() before)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() after "
                              "optimizer.synchronize(): step() synchronizes again, which costs time; after an "
                              "explicit synchronize(), call step() inside `with optimizer.skip_synchronize():`")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, set_to_none=False):
        if self._submitted or self._sparse:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but before "
                                 "optimizer.step() or optimizer.synchronize(); the gradients' "
                                 "allreduces are still in flight")
        return super(self.__class__, self).zero_grad(set_to_none=set_to_none)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False, process_set=None):
    """Wraps `optimizer` for data-parallel training (see this module's docstring). With
    `process_set`, gradients are averaged over its members only (only they call this)."""
    _set_id(process_set)  # a registered set, or None
    if op is mpi_ops.Adasum:
        raise NotImplementedError("DistributedOptimizer: op=Adasum is not supported by kolo")
    if num_groups or groups:
        warnings.warn("DistributedOptimizer: num_groups/groups are ignored; kolo fuses tensors itself")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor, process_set, sparse_as_dense)

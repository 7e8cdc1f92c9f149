"""The autograd Functions of kolo.torch's blocking collectives, with horovod.torch's backward
rules (each backward is itself a collective, so every rank must run backward through the
same collectives in the same order, as in Horovod):

  allreduce(op)            grad = allreduce(grad_out, the same op and scale factors)
  allgather                grad = my rows of allreduce(grad_out, Average)
  broadcast(root)          grad = allreduce(grad_out, Average) on root, zeros elsewhere
  alltoall(splits)         grad = alltoall(grad_out, splits = the rows received)
  reducescatter(op)        grad = allgather(grad_out x size for Sum, x prescale x postscale)
  grouped forms            the same, member by member, as one grouped collective

The forward of each runs the plain (non-differentiable) blocking call on detached tensors.
"""
import torch

from kolo.torch import mpi_ops
from kolo.torch import scatter_ops  # noqa: F401  (circular: used at call time only)
from kolo.torch.mpi_ops import Average, Sum


def wants_grad(tensor):
    """Whether a call on `tensor` must go through autograd (the Function's own cost is a
    third of a small allreduce's, so calls that need no gradient skip it)."""
    return isinstance(tensor, torch.Tensor) and tensor.requires_grad and torch.is_grad_enabled()


def _set_size(process_set):
    return mpi_ops.size() if process_set is None else process_set.size()


def _set_rank(process_set):
    return mpi_ops.rank() if process_set is None else process_set.rank()


def _gather_dim0(dims, process_set):
    """Every member's first dimension for each entry of `dims`, as lists in set-rank order."""
    local = torch.tensor(dims, dtype=torch.int64).reshape(1, len(dims))
    every = mpi_ops.allgather(local, process_set=process_set)
    return every.t().tolist()


def _own_rows(grad, sizes, me, rows):
    start = sum(sizes[:me])
    return grad.narrow(0, start, rows)


class Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op, ctx.pre, ctx.post, ctx.ps = op, prescale_factor, postscale_factor, process_set
        return mpi_ops._reduce_copy(tensor.detach(), name, op, prescale_factor, postscale_factor, process_set)

    @staticmethod
    def backward(ctx, grad_output):
        return mpi_ops.allreduce(grad_output, op=ctx.op, prescale_factor=ctx.pre, postscale_factor=ctx.post,
                                 process_set=ctx.ps), None, None, None, None, None


class Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim0 = tensor.shape[0] if tensor.dim() > 0 else 1
        ctx.shape, ctx.ps = tensor.shape, process_set
        return mpi_ops._gather_copy(tensor.detach(), name, process_set)

    @staticmethod
    def backward(ctx, grad_output):
        reduced = mpi_ops.allreduce(grad_output, op=Average, process_set=ctx.ps)
        sizes = _gather_dim0([ctx.dim0], ctx.ps)[0]
        return _own_rows(reduced, sizes, _set_rank(ctx.ps), ctx.dim0).reshape(ctx.shape), None, None


class Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root, ctx.ps = root_rank, process_set
        return mpi_ops._broadcast_copy(tensor.detach(), root_rank, name, process_set)

    @staticmethod
    def backward(ctx, grad_output):
        # Only root's input reached the outputs.
        reduced = mpi_ops.allreduce(grad_output, op=Average, process_set=ctx.ps)
        if mpi_ops.rank() != ctx.root:
            reduced = torch.zeros_like(reduced)
        return reduced, None, None, None


class Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        handles = []

        def start(n):
            h = scatter_ops.alltoall_async(tensor.detach(), splits, n, process_set)
            handles.append(mpi_ops._record(h, "alltoall").handle)
            return h
        result = scatter_ops._blocking("alltoall", name, start)
        # The reverse exchange sends back what each rank sent here (even without splits: the
        # ranks' first dimensions may differ).
        ctx.received = torch.tensor(handles[0].received_splits(), dtype=torch.int32)
        ctx.ps, ctx.tuple = process_set, splits is not None
        if not ctx.tuple:
            return result
        out, received = result
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad_output, *unused):
        back, _ = scatter_ops.alltoall(grad_output.contiguous(), splits=ctx.received, process_set=ctx.ps)
        return back, None, None, None


def _scaled_for_scatter_backward(grads, op, pre, post, process_set):
    factor = (float(_set_size(process_set)) if op == Sum else 1.0) * pre * post
    return [g if factor == 1.0 else g * factor for g in grads]


class Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.op, ctx.ps, ctx.pre, ctx.post = mpi_ops._op_code(op, None, "reducescatter"), process_set, \
            prescale_factor, postscale_factor
        return scatter_ops._blocking("reducescatter", name, lambda n: scatter_ops.reducescatter_async(
            tensor.detach(), n, op, process_set, prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        g, = _scaled_for_scatter_backward([grad_output], ctx.op, ctx.pre, ctx.post, ctx.ps)
        return mpi_ops.allgather(g.contiguous(), process_set=ctx.ps), None, None, None, None, None


class GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op, ctx.pre, ctx.post, ctx.ps = op, prescale_factor, postscale_factor, process_set
        return tuple(scatter_ops.grouped_allreduce([t.detach() for t in tensors], None, name, None, op,
                                                   prescale_factor, postscale_factor, process_set))

    @staticmethod
    def backward(ctx, *grads):
        reduced = scatter_ops.grouped_allreduce([g.contiguous() for g in grads], op=ctx.op, prescale_factor=ctx.pre,
                                                postscale_factor=ctx.post, process_set=ctx.ps)
        return (None, None, None, None, None, *reduced)


class GroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.dims = [t.shape[0] if t.dim() > 0 else 1 for t in tensors]
        ctx.shapes, ctx.ps = [t.shape for t in tensors], process_set
        return tuple(scatter_ops.grouped_allgather([t.detach() for t in tensors], name, process_set))

    @staticmethod
    def backward(ctx, *grads):
        reduced = scatter_ops.grouped_allreduce([g.contiguous() for g in grads], op=Average, process_set=ctx.ps)
        sizes = _gather_dim0(ctx.dims, ctx.ps)
        me = _set_rank(ctx.ps)
        return (None, None, *[_own_rows(r, s, me, d).reshape(shape)
                              for r, s, d, shape in zip(reduced, sizes, ctx.dims, ctx.shapes)])


class GroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.op, ctx.ps, ctx.pre, ctx.post = mpi_ops._op_code(op, None, "grouped_reducescatter"), process_set, \
            prescale_factor, postscale_factor
        return tuple(scatter_ops.grouped_reducescatter([t.detach() for t in tensors], name, None, op, process_set,
                                                       prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, *grads):
        scaled = _scaled_for_scatter_backward(grads, ctx.op, ctx.pre, ctx.post, ctx.ps)
        gathered = scatter_ops.grouped_allgather([g.contiguous() for g in scaled], process_set=ctx.ps)
        return (None, None, None, None, None, *gathered)

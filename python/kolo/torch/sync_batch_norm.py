"""SyncBatchNorm: batch normalization whose statistics cover the whole global batch.

Horovod's `hvd.SyncBatchNorm` in kolo. In training mode every rank's forward pass allgathers
each rank's (count, mean, M2) per channel and combines them in float64 in rank order, so every
rank normalizes with the same mean and variance (those of the concatenated batch), and the
running statistics stay identical across ranks. The backward pass allreduces the per-channel sums
of the output gradient and of gradient x normalized input, which the input gradient needs; the
weight and bias gradients stay local sums, like every other parameter's, for
`DistributedOptimizer` to average. In eval mode, or with one rank, it is torch's BatchNorm.

Collectives are named after the layer's position among the SyncBatchNorm layers built in this
process and a per-layer call count, so every rank must build the same layers in the same order
and call them the same number of times (as Horovod also requires). A rank with an empty batch
still takes part and contributes nothing.
"""
import itertools

import torch
from torch.nn.modules.batchnorm import _BatchNorm

from kolo.torch import mpi_ops

_layer_ids = itertools.count()


def _local_moments(x):
    """Per channel: count, mean and sum of squared deviations (M2), in float64."""
    c = x.shape[1]
    flat = x.detach().transpose(0, 1).reshape(c, -1).to(torch.float64)
    n = flat.shape[1]
    if n == 0:
        zeros = torch.zeros(c, dtype=torch.float64)
        return 0, zeros, zeros
    mean = flat.mean(1)
    m2 = ((flat - mean[:, None]) ** 2).sum(1)
    return n, mean, m2


def _combine(gathered, c):
    """Chan et al.'s pairwise update in rank order: the global count, mean and M2 per channel."""
    total, mean, m2 = 0, torch.zeros(c, dtype=torch.float64), torch.zeros(c, dtype=torch.float64)
    for row in gathered:
        n = int(row[0].item())
        if n == 0:
            continue
        mu, q = row[1:1 + c], row[1 + c:]
        delta = mu - mean
        both = total + n
        mean = mean + delta * (n / both)
        m2 = m2 + q + delta * delta * (total * n / both)
        total = both
    return total, mean, m2


class _SyncBatchNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, mean, invstd, name, count):
        shape = [1, -1] + [1] * (x.dim() - 2)
        xhat = (x - mean.view(shape)) * invstd.view(shape)
        ctx.save_for_backward(xhat, weight, invstd)
        ctx.name, ctx.count, ctx.affine = name, count, weight is not None
        y = xhat
        if weight is not None:
            y = y * weight.view(shape) + bias.view(shape)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        xhat, weight, invstd = ctx.saved_tensors
        c = xhat.shape[1]
        dims = [0] + list(range(2, xhat.dim()))
        shape = [1, -1] + [1] * (xhat.dim() - 2)
        local_g = grad_y.sum(dims)
        local_gx = (grad_y * xhat).sum(dims)
        sums = mpi_ops.allreduce(torch.cat([local_g, local_gx]).to(torch.float64).contiguous(),
                                 op=mpi_ops.Sum, name=ctx.name + ".grad")
        count = ctx.count
        mean_g = (sums[:c] / count).to(grad_y.dtype)
        mean_gx = (sums[c:] / count).to(grad_y.dtype)
        scale = invstd if weight is None else invstd * weight
        grad_x = (grad_y - mean_g.view(shape) - xhat * mean_gx.view(shape)) * scale.view(shape)
        grad_w = local_gx if ctx.affine and ctx.needs_input_grad[1] else None
        grad_b = local_g if ctx.affine and ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Drop-in for torch.nn.BatchNorm1d/2d/3d (input of shape (N, C, ...)) with statistics over
    every rank's batch. Same arguments as torch's BatchNorm."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device=device, dtype=dtype)
        self._kolo_name = "SyncBatchNorm.%d" % next(_layer_ids)
        self._kolo_calls = 0

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("kolo.torch.SyncBatchNorm: expected an input of shape (N, C, ...), got %d dimensions"
                             % input.dim())
        if input.shape[1] != self.num_features:
            raise ValueError("kolo.torch.SyncBatchNorm: the input has %d channels, the layer %d"
                             % (input.shape[1], self.num_features))

    def forward(self, input):
        if not self.training or mpi_ops.size() == 1:
            return super().forward(input)
        self._check_input_dim(input)
        name = "%s.%d" % (self._kolo_name, self._kolo_calls)
        self._kolo_calls += 1
        c = self.num_features
        n, mean, m2 = _local_moments(input)
        row = torch.cat([torch.tensor([float(n)], dtype=torch.float64), mean, m2]).view(1, -1)
        gathered = mpi_ops.allgather(row, name=name + ".stats")
        total, mean, m2 = _combine(gathered, c)
        if total == 0:
            raise ValueError("kolo.torch.SyncBatchNorm: every rank's batch is empty")
        var = m2 / total
        if self.track_running_stats:
            factor = self.momentum
            if self.num_batches_tracked is not None:
                self.num_batches_tracked.add_(1)
                if self.momentum is None:
                    factor = 1.0 / float(self.num_batches_tracked)
            unbiased = m2 / (total - 1) if total > 1 else var
            with torch.no_grad():
                self.running_mean.mul_(1 - factor).add_(mean.to(self.running_mean.dtype), alpha=factor)
                self.running_var.mul_(1 - factor).add_(unbiased.to(self.running_var.dtype), alpha=factor)
        invstd = torch.rsqrt(var + self.eps).to(input.dtype)
        return _SyncBatchNormFn.apply(input, self.weight, self.bias, mean.to(input.dtype), invstd, name, total)

"""Horovod's alltoall, reducescatter and grouped collectives over kolo (the handle, naming
and error rules of kolo.torch.mpi_ops apply). Grouped forms run their tensors as one unit:
none starts on any rank before all are ready everywhere; member i is named "<name>[i]".

The blocking forms are differentiable with Horovod's backward rules (autograd.py)."""
import numbers

import torch

from kolo import _kolo
from kolo.torch import autograd, mpi_ops
from kolo.torch.mpi_ops import _blocking, _fetch, _name, _op_code, _register, synchronize
from kolo.torch.process_sets import _set_id


def _member(t, what):
    code = mpi_ops._dtype_code(t, what)
    return (t.data_ptr(), code, list(t.shape), mpi_ops._device(t))


def _split_list(splits):
    """`splits` as a list of ints. Horovod takes integers only (an int32 tensor, or a list of
    ints); anything else is a ValueError, raised before anything is submitted."""
    if splits is None:
        return None
    if torch.is_tensor(splits):
        if splits.dtype.is_floating_point or splits.dtype.is_complex or splits.dtype == torch.bool:
            raise ValueError("kolo.torch.alltoall: splits must hold integers (Horovod: an int32 tensor), "
                             "got a %s tensor" % splits.dtype)
        return [int(x) for x in splits.tolist()]
    values = list(splits)
    for x in values:
        if isinstance(x, bool) or not isinstance(x, numbers.Integral):
            raise ValueError("kolo.torch.alltoall: splits must hold integers, got %r" % (x,))
    return [int(x) for x in values]


def alltoall_async(tensor, splits=None, name=None, process_set=None, output=None):
    """Starts sending rows of `tensor` to every rank: splits[j] rows to rank j (None: equal
    shares). With `process_set`: one split per member, in set-rank order. `output` (CPU,
    as torch.distributed's all_to_all_single takes one): the rows received land in its first
    rows (the rest are left alone); it must have the input's dtype and trailing dimensions
    and room for them, else this rank's synchronize() raises KoloError naming the tensor (the
    exchange still completes on every rank). synchronize() returns what alltoall() returns.
    Splits that are not integers raise ValueError here (as Horovod); other bad splits (a sum
    that exceeds the first dimension, an uneven equal split) raise KoloValueError, a
    ValueError, from synchronize."""
    set_id = _set_id(process_set)
    split_list = _split_list(splits)
    name = _name("alltoall", name)
    work = tensor.detach().contiguous()
    code = mpi_ops._dtype_code(work, "alltoall")
    if output is None:
        h = _kolo.alltoall_async(work.data_ptr(), code, list(work.shape), split_list, name, mpi_ops._device(work),
                                 set_id)
        keep = (tensor, work)
        result = lambda: _fetch(h, -1, tensor)
    else:
        out_code = mpi_ops._dtype_code(output, "alltoall (output)")
        # Written in place where contiguous; else into a contiguous copy, written back. Tensors
        # off the CPU are refused by kolo on every rank (a TypeError here would leave the peers
        # waiting for this rank).
        out_work = output.detach() if output.is_contiguous() else torch.empty_like(output, memory_format=torch.contiguous_format)
        h = _kolo.alltoall_into_async(work.data_ptr(), code, list(work.shape), out_work.data_ptr(), out_code,
                                      list(out_work.shape), split_list, name, set_id, mpi_ops._device(work),
                                      mpi_ops._device(out_work))
        keep = (tensor, work, output, out_work)

        def result():
            rows = sum(h.received_splits())
            if out_work.data_ptr() != output.data_ptr():
                with torch.no_grad():
                    output.narrow(0, 0, rows).copy_(out_work.narrow(0, 0, rows))
            return output.narrow(0, 0, rows)

    def finish():
        out = result()
        if splits is None:
            return out
        return out, torch.tensor(h.received_splits(), dtype=torch.int32)
    return _register(h, keep, finish, name)


def alltoall(tensor, splits=None, name=None, process_set=None, output=None):
    """Rows received from ranks 0, 1, ... end to end; with `splits` given, also the number
    of rows received from each rank (Horovod's (output, received_splits)). With `output`:
    the received rows are its first rows, and the result is output[:rows] (a view of it).
    Differentiable (without `output`): the gradient travels back by the reverse alltoall."""
    if output is None and autograd.wants_grad(tensor):
        return autograd.Alltoall.apply(tensor, splits, name, process_set)
    return _blocking("alltoall", name, lambda n: alltoall_async(tensor, splits, n, process_set, output))


def reducescatter_async(tensor, name=None, op=None, process_set=None, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts reducing `tensor` over ranks (Average by default); this rank's share of the
    first dimension comes back (the first dim % size ranks get one row more). Arguments in
    Horovod's order (name before op)."""
    set_id = _set_id(process_set)
    op = _op_code(op, None, "reducescatter")
    name = _name("reducescatter", name)
    work = tensor.detach().contiguous()
    code = mpi_ops._dtype_code(work, "reducescatter")
    h = _kolo.reducescatter_async(work.data_ptr(), code, list(work.shape), name, op, float(prescale_factor),
                                  float(postscale_factor), mpi_ops._device(work), set_id)
    return _register(h, (tensor, work), lambda: _fetch(h, -1, tensor), name)


def reducescatter(tensor, name=None, compression=None, op=None, process_set=None,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Blocking reducescatter; `compression` (Compression.fp16) sends a compressed copy.
    Differentiable: the gradient is the allgather of the output gradients (scaled as
    Horovod scales them)."""
    if compression is not None:
        sent, ctx = compression.compress(tensor)
        return compression.decompress(reducescatter(sent, name, None, op, process_set, prescale_factor,
                                                    postscale_factor), ctx)
    if autograd.wants_grad(tensor):
        return autograd.Reducescatter.apply(tensor, name, op, process_set, prescale_factor, postscale_factor)
    return _blocking("reducescatter", name, lambda n: reducescatter_async(tensor, n, op, process_set,
                                                                          prescale_factor, postscale_factor))


def _in_place_group(tensors):
    """Contiguous work tensors for in-place members, and how to write non-contiguous ones back."""
    works = [t.detach() if t.is_contiguous() else t.detach().contiguous() for t in tensors]

    def write_back():
        with torch.no_grad():
            for t, w in zip(tensors, works):
                if w.data_ptr() != t.data_ptr():
                    t.copy_(w)
        return list(tensors)
    return works, write_back


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=None):
    """In place, as one unit; synchronize() returns the list of tensors."""
    set_id = _set_id(process_set)
    op = _op_code(op, average, "grouped_allreduce")
    name = _name("grouped_allreduce", name)
    works, write_back = _in_place_group(list(tensors))
    h = _kolo.grouped_allreduce_async([_member(w, "grouped_allreduce") for w in works], name, op,
                                      float(prescale_factor), float(postscale_factor), set_id)
    return _register(h, (list(tensors), works), write_back, name)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=None):
    """Out of place: synchronize() returns new tensors."""
    outs = [t.detach().clone(memory_format=torch.contiguous_format) for t in tensors]
    return grouped_allreduce_async_(outs, average, name, op, prescale_factor, postscale_factor, process_set)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=None):
    return _blocking("grouped_allreduce", name, lambda n: grouped_allreduce_async_(
        tensors, average, n, op, prescale_factor, postscale_factor, process_set))


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=None):
    """Out of place, blocking; differentiable as allreduce is, member by member."""
    tensors = list(tensors)
    if compression is not None:
        packed = [compression.compress(t) for t in tensors]
        outs = grouped_allreduce([p for p, _ in packed], average, name, None, op, prescale_factor,
                                 postscale_factor, process_set)
        return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, packed)]
    op = _op_code(op, average, "grouped_allreduce")
    if any(autograd.wants_grad(t) for t in tensors):
        return list(autograd.GroupedAllreduce.apply(name, op, prescale_factor, postscale_factor, process_set,
                                                    *tensors))
    return _blocking("grouped_allreduce", name, lambda n: grouped_allreduce_async(
        tensors, None, n, op, prescale_factor, postscale_factor, process_set))


def _grouped_results(h, tensors, works, name):
    return _register(h, (list(tensors), works),
                     lambda: [_fetch(h, i, t) for i, t in enumerate(tensors)], name)


def grouped_allgather_async(tensors, name=None, process_set=None):
    set_id = _set_id(process_set)
    name = _name("grouped_allgather", name)
    works = [t.detach().reshape(1) if t.dim() == 0 else t.detach().contiguous() for t in tensors]
    h = _kolo.grouped_allgather_async([_member(w, "grouped_allgather") for w in works], name, set_id)
    return _grouped_results(h, tensors, works, name)


def grouped_allgather(tensors, name=None, process_set=None):
    """Blocking; differentiable as allgather is, member by member."""
    tensors = list(tensors)
    if any(autograd.wants_grad(t) for t in tensors):
        return list(autograd.GroupedAllgather.apply(name, process_set, *tensors))
    return _blocking("grouped_allgather", name, lambda n: grouped_allgather_async(tensors, n, process_set))


def grouped_reducescatter_async(tensors, name=None, op=None, process_set=None, prescale_factor=1.0,
                                postscale_factor=1.0):
    set_id = _set_id(process_set)
    op = _op_code(op, None, "grouped_reducescatter")
    name = _name("grouped_reducescatter", name)
    works = [t.detach().contiguous() for t in tensors]
    h = _kolo.grouped_reducescatter_async([_member(w, "grouped_reducescatter") for w in works], name, op,
                                          float(prescale_factor), float(postscale_factor), set_id)
    return _grouped_results(h, tensors, works, name)


def grouped_reducescatter(tensors, name=None, compression=None, op=None, process_set=None,
                          prescale_factor=1.0, postscale_factor=1.0):
    """Blocking; differentiable as reducescatter is, member by member."""
    tensors = list(tensors)
    if compression is not None:
        packed = [compression.compress(t) for t in tensors]
        outs = grouped_reducescatter([p for p, _ in packed], name, None, op, process_set, prescale_factor,
                                     postscale_factor)
        return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, packed)]
    if any(autograd.wants_grad(t) for t in tensors):
        return list(autograd.GroupedReducescatter.apply(name, op, process_set, prescale_factor, postscale_factor,
                                                        *tensors))
    return _blocking("grouped_reducescatter", name, lambda n: grouped_reducescatter_async(
        tensors, n, op, process_set, prescale_factor, postscale_factor))

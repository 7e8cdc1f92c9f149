"""Horovod's collective operations on torch tensors, over kolo's runtime.

Every function has the signature and semantics of ``horovod.torch`` (docs/pytorch.md lists
the differences). Tensors reach kolo as (data pointer, dtype, shape); the tensor, and any
output or staging tensor, is kept alive by this module's handle record until the collective
completed, because kolo reads and writes that memory from its coordinator thread.

Handles are ints, as in Horovod: ``synchronize(h)`` waits and returns the output tensor,
``poll(h)`` says whether it is done. A failed collective raises :class:`KoloError` (alias
``HorovodInternalError``) from ``synchronize`` with kolo's message (tensor name, ranks,
values), on every rank the failure concerns; the job goes on.

Names: collectives are matched across ranks by name. ``name=None`` gives an async call the
automatic name ``<op>.noname.<n>``, n counting this process's unnamed async calls (all kinds
together) from 0, and a blocking call ``<op>.noname.blocking`` (see _blocking): ranks that
make the same sequence of unnamed calls agree, as with Horovod.
"""
import itertools
import os
import threading

import torch

from kolo import _kolo
from kolo.torch.process_sets import _set_id, add_process_set

KoloError = _kolo.KoloError
# A KoloError for an invalid argument (kolo's code "invalid_argument"); also a ValueError, the
# type Horovod raises for a bad argument (a name already in flight, bad alltoall splits).
KoloValueError = _kolo.KoloValueError
HorovodInternalError = KoloError

# Reduce operations, as module-level names (Horovod's hvd.Average, ...).
Average = _kolo.OP_AVERAGE
Sum = _kolo.OP_SUM
Min = _kolo.OP_MIN
Max = _kolo.OP_MAX
Product = _kolo.OP_PRODUCT


class _Unsupported:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


Adasum = _Unsupported("Adasum")

_OP_NAMES = {Average: "Average", Sum: "Sum", Min: "Min", Max: "Max", Product: "Product"}

_DTYPES = {
    torch.uint8: _kolo.DTYPE_UINT8,
    torch.int32: _kolo.DTYPE_INT32,
    torch.int64: _kolo.DTYPE_INT64,
    torch.float16: _kolo.DTYPE_FLOAT16,
    torch.bfloat16: _kolo.DTYPE_BFLOAT16,
    torch.float32: _kolo.DTYPE_FLOAT32,
    torch.float64: _kolo.DTYPE_FLOAT64,
    torch.int8: _kolo.DTYPE_INT8,
    torch.int16: _kolo.DTYPE_INT16,
    torch.bool: _kolo.DTYPE_BOOL,  # sum/max reduce as OR, product/min as AND (torch.distributed's rule)
}


# --- job ------------------------------------------------------------------------------------

def init(comm=None, process_sets=None):
    """Starts kolo (MPI and the coordinator thread). Idempotent. `process_sets`: a list of
    ProcessSet (or rank lists) registered on every rank, in this order (every rank must pass
    the same), or "dynamic" (accepted for Horovod's sake: kolo's sets are always dynamic).
    Join follows Horovod's rules (KOLO_JOIN_RULES=horovod, set here unless the environment
    says otherwise; docs/pytorch.md, "join")."""
    if comm is not None:
        raise ValueError("kolo.torch.init: comm= is not supported; kolo always uses the whole "
                         "MPI job (MPI_COMM_WORLD)")
    if isinstance(process_sets, str) and process_sets != "dynamic":
        raise ValueError("kolo.torch.init: process_sets must be a list of ProcessSet or \"dynamic\", "
                         "got %r" % (process_sets,))
    os.environ.setdefault("KOLO_JOIN_RULES", "horovod")
    starting = not _kolo.is_initialized()
    _kolo.init()
    if starting:
        # Every rank's local_size, once (init is collective): is_homogeneous() answers from it.
        sizes = torch.tensor([_kolo.local_size()], dtype=torch.int64)
        _kolo_hosts["homogeneous"] = len(set(_blocking("allgather", "kolo.torch.init.local_size",
                                                       lambda n: allgather_async(sizes, n)).tolist())) == 1
    if process_sets is not None and not isinstance(process_sets, str):
        for ps in process_sets:
            add_process_set(ps)


def shutdown():
    """Stops kolo on this rank; collectives still pending anywhere fail naming this rank."""
    _kolo.shutdown()


is_initialized = _kolo.is_initialized


def _need_init(what):
    if not _kolo.is_initialized():
        raise ValueError("kolo.torch.%s: kolo has not been initialised; call init() first" % what)


def _topology(what, doc):
    query = getattr(_kolo, what)

    def f():
        _need_init(what)
        return query()
    f.__name__ = what
    f.__doc__ = doc
    return f


size = _topology("size", "Number of ranks in the job.")
rank = _topology("rank", "This process's rank, 0 .. size()-1.")
local_size = _topology("local_size", "Number of ranks on this host.")
local_rank = _topology("local_rank", "This process's rank among the ranks of its host.")
cross_size = _topology("cross_size", "Number of hosts.")
cross_rank = _topology("cross_rank", "Index of this process's host.")


# What this build of kolo has, answered as horovod.torch answers (docs/pytorch.md).

_kolo_hosts = {"homogeneous": True}  # set by init()


def is_homogeneous():
    """Whether every host runs the same number of ranks."""
    _need_init("is_homogeneous")
    return _kolo_hosts["homogeneous"]


def mpi_threads_supported():
    """True: only kolo's coordinator thread calls MPI, whatever threads the script runs."""
    return True


def mpi_built():
    return True


def gloo_built():
    """Whether kolo was built with its Gloo transport (KOLO_BACKEND=gloo, docs/gloo.md)."""
    return bool(_kolo.GLOO_BUILT)


def gloo_enabled():
    """Whether this job runs on Gloo: KOLO_BACKEND=gloo, as kolo's init read it."""
    return gloo_built() and os.environ.get("KOLO_BACKEND", "mpi") == "gloo"


def mpi_enabled():
    """Whether this job runs on MPI (KOLO_BACKEND=mpi, the default)."""
    return not gloo_enabled()


def nccl_built():
    """NCCL's version code (e.g. 22703) when kolo was built with its GPU path, else 0."""
    return _kolo.NCCL_VERSION


def cuda_built():
    return bool(_kolo.CUDA_BUILT)


def rocm_built():
    return False


def ccl_built():
    """False: kolo has no oneCCL backend."""
    return False


def ddl_built():
    """False: kolo has no IBM DDL backend."""
    return False


# --- names and handles ----------------------------------------------------------------------

_auto_names = itertools.count()
_handle_ids = itertools.count()
_handles = {}
_handles_lock = threading.Lock()


# Name -> kolo handle of this module's collectives not yet synchronized: a name submitted
# again while its collective is still in flight on this rank is refused at the call.
_in_flight = {}


def _name(kind, name):
    """The name a submission uses. A name whose collective (submitted through this module)
    is still in flight on this rank raises KoloValueError, a ValueError, at once, as in
    Horovod; nothing is submitted. (kolo itself refuses such a submission too, but fails
    only its handle: docs/pytorch.md, "Names".)"""
    if name is None:
        return "%s.noname.%d" % (kind, next(_auto_names))
    if not isinstance(name, str) or not name:
        raise ValueError("kolo.torch.%s: name must be a non-empty string, got %r" % (kind, name))
    h = _in_flight.get(name)
    if h is not None and not h.done():
        e = KoloValueError("%s \"%s\": submitted again on rank %d while a collective under this name is "
                           "still in flight; this submission is refused and the one in flight goes on (a name "
                           "may be reused once its handle has completed)" % (kind, name, _kolo.rank()))
        e.code = "invalid argument"
        raise e
    return name


# One lock per kind: held by the blocking call that uses "<kind>.noname.blocking".
_blocking_locks = {}


def _blocking(kind, name, start):
    """Runs a blocking call: `start(name)` submits and returns a handle, which is waited for.
    Without a name the call is named "<kind>.noname.blocking", the same every time: it is
    complete on this rank before the call returns, so the name is free again, and one name
    per kind keeps kolo's response cache hitting (a fresh name per call costs a full
    negotiation: docs/benchmarks.md, "PyTorch"). Such calls from several threads of a process
    take turns (a lock per kind), so every rank uses the name as often as it makes the calls."""
    if name is not None:
        return synchronize(start(name))
    lock = _blocking_locks.get(kind)
    if lock is None:
        with _handles_lock:
            lock = _blocking_locks.setdefault(kind, threading.Lock())
    with lock:
        return synchronize(start(kind + ".noname.blocking"))


class _Record:
    """One collective in flight: kolo's handle, the tensors it uses (kept alive until
    completion) and how to produce the result once it completed."""
    __slots__ = ("handle", "keep", "finish", "name")

    def __init__(self, handle, keep, finish, name):
        self.handle = handle
        self.keep = keep
        self.finish = finish
        self.name = name


def _register(handle, keep, finish, name):
    """A handle number for kolo's `handle` of the collective `name`."""
    h = next(_handle_ids)
    with _handles_lock:
        _handles[h] = _Record(handle, keep, finish, name)
    _in_flight[name] = handle
    return h


def _record(handle, what):
    with _handles_lock:
        rec = _handles.get(handle)
    if rec is None:
        raise ValueError("kolo.torch.%s: unknown or already synchronized handle %r" % (what, handle))
    return rec


def poll(handle):
    """True when the collective of `handle` has completed (never blocks)."""
    return _record(handle, "poll").handle.done()


def synchronize(handle):
    """Waits for `handle` and returns its output tensor; raises KoloError if it failed."""
    rec = _record(handle, "synchronize")
    try:
        rec.handle.wait()
        return rec.finish()
    finally:
        with _handles_lock:
            _handles.pop(handle, None)
            if _in_flight.get(rec.name) is rec.handle:
                del _in_flight[rec.name]


# --- tensors --------------------------------------------------------------------------------

def _dtype_code(tensor, what):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("kolo.torch.%s: expected a torch.Tensor, got %s" % (what, type(tensor).__name__))
    code = _DTYPES.get(tensor.dtype)
    if code is None:
        raise TypeError("kolo.torch.%s: dtype %s is not supported; kolo supports %s" %
                        (what, tensor.dtype, ", ".join(str(d) for d in _DTYPES)))
    if tensor.is_sparse:
        raise TypeError("kolo.torch.%s: sparse tensors are not supported" % what)
    return code


def _device(tensor):
    if tensor.is_cpu:
        return -1
    if tensor.device.type == "cuda":
        # kolo waits for nothing on the GPU side when no event is given: make the data ready.
        torch.cuda.current_stream(tensor.device).synchronize()
        return tensor.device.index
    raise TypeError("kolo.torch: tensors on %s are not supported (cpu or cuda)" % tensor.device)


def _contiguous_work(tensor):
    """The tensor kolo works on in place: `tensor` itself when contiguous, else a copy
    (written back by the caller)."""
    if tensor.is_contiguous():
        return tensor  # kolo reads only its memory: no detached view needed
    return tensor.detach().contiguous()



def _write_back(tensor, work):
    """The completion step of an in-place op on `tensor` that ran on `work`: nothing when
    `work` is `tensor`'s own contiguous storage, else a copy back into `tensor`."""
    if work is tensor or (work.data_ptr() == tensor.data_ptr() and work.is_contiguous() and tensor.is_contiguous()):
        return lambda: tensor

    def finish():
        with torch.no_grad():
            tensor.copy_(work)
        return tensor
    return finish

def _op_code(op, average, what):
    if average is not None:
        if op is not None:
            raise ValueError("kolo.torch.%s: give op= or the deprecated average=, not both" % what)
        return Average if average else Sum
    if op is None:
        return Average
    if op is Adasum:
        raise NotImplementedError("kolo.torch.%s: op=Adasum is not supported by kolo" % what)
    if op not in _OP_NAMES:
        raise ValueError("kolo.torch.%s: unknown op %r (Average, Sum, Min, Max, Product)" % (what, op))
    return op


# --- allreduce ------------------------------------------------------------------------------

def _allreduce_into(work, name, op, prescale_factor, postscale_factor, keep, finish, process_set):
    code = _dtype_code(work, "allreduce")
    dev = _device(work)
    h = _kolo.allreduce_async(work.data_ptr(), code, list(work.shape), name, op,
                              float(prescale_factor), float(postscale_factor), dev, _set_id(process_set))
    return _register(h, keep, finish, name)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=None):
    """In place: starts reducing `tensor` over all ranks (of `process_set`); returns a handle."""
    op = _op_code(op, average, "allreduce_async_")
    name = _name("allreduce", name)
    work = _contiguous_work(tensor)
    finish = _write_back(tensor, work)
    return _allreduce_into(work, name, op, prescale_factor, postscale_factor, (tensor, work), finish, process_set)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=None):
    """Out of place: starts reducing a copy of `tensor`; synchronize() returns the result."""
    op = _op_code(op, average, "allreduce_async")
    name = _name("allreduce", name)
    out = tensor.detach().clone(memory_format=torch.contiguous_format)
    return _allreduce_into(out, name, op, prescale_factor, postscale_factor, (tensor, out), lambda: out,
                           process_set)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=None):
    """In place, blocking."""
    return _blocking("allreduce", name, lambda n: allreduce_async_(tensor, average, n, op, prescale_factor,
                                                                   postscale_factor, process_set))


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=None):
    """Out of place, blocking, differentiable (for Sum and Average). `compression`
    (Compression.fp16) reduces a compressed copy and returns the result in tensor's dtype."""
    op = _op_code(op, average, "allreduce")
    if compression is not None:
        compressed, ctx = compression.compress(tensor)
        reduced = _reduce_copy(compressed, name, op, prescale_factor, postscale_factor, process_set)
        return compression.decompress(reduced, ctx)
    return _reduce_copy(tensor, name, op, prescale_factor, postscale_factor, process_set)


def _reduce_copy(tensor, name, op, prescale_factor, postscale_factor, process_set):
    """allreduce's result: through autograd when a gradient is wanted, else directly (the
    autograd Function's own cost is a third of a small allreduce's)."""
    if _autograd.wants_grad(tensor):
        return _autograd.Allreduce.apply(tensor, name, op, prescale_factor, postscale_factor, process_set)
    return _blocking("allreduce", name, lambda n: allreduce_async(tensor, None, n, op, prescale_factor,
                                                                  postscale_factor, process_set))


# --- sparse allreduce -----------------------------------------------------------------------

def sparse_allreduce_async(tensor, name=None, op=None, process_set=None):
    """Horovod's allreduce of a sparse COO tensor: every rank's indices and values are
    allgathered (names "<name>.indices" and "<name>.values"), so the result holds every
    rank's entries (duplicates sum when it is coalesced); Average divides the values by the
    number of ranks. Returns a function that waits and returns the reduced sparse tensor (as
    Horovod's does)."""
    if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
        raise TypeError("kolo.torch.sparse_allreduce_async: expected a sparse COO tensor, got %s"
                        % (tensor.layout if isinstance(tensor, torch.Tensor) else type(tensor).__name__))
    op = _op_code(op, None, "sparse_allreduce_async")
    if op not in (Average, Sum):
        raise ValueError("kolo.torch.sparse_allreduce_async: op must be Average or Sum, got %s" % _OP_NAMES[op])
    name = _name("sparse_allreduce", name)
    shape = tensor.shape
    # Allgather concatenates along dimension 0: indices travel as [nnz, sparse dims].
    hi = allgather_async(tensor._indices().t().contiguous(), name=name + ".indices", process_set=process_set)
    hv = allgather_async(tensor._values().contiguous(), name=name + ".values", process_set=process_set)
    ranks = size() if process_set is None else process_set.size()

    def wait():
        values = synchronize(hv)
        indices = synchronize(hi)
        if op == Average:
            values = values / ranks
        return torch.sparse_coo_tensor(indices.t(), values, shape)
    return wait


# --- allgather ------------------------------------------------------------------------------

def allgather_async(tensor, name=None, process_set=None):
    """Starts concatenating every rank's `tensor` along dimension 0 (which may differ per
    rank); synchronize() returns the gathered tensor."""
    set_id = _set_id(process_set)
    name = _name("allgather", name)
    code = _dtype_code(tensor, "allgather")
    work = tensor.detach()
    if work.dim() == 0:
        work = work.reshape(1)
    work = work.contiguous()
    dev = _device(work)
    h = _kolo.allgather_async(work.data_ptr(), code, list(work.shape), name, dev, set_id)

    return _register(h, (tensor, work), lambda: _fetch(h, -1, tensor), name)


def _fetch(h, member, like):
    """The result kolo holds for handle `h` (member of a group, or -1) as a tensor of
    `like`'s dtype and device."""
    out = torch.empty(h.output_shape(member), dtype=like.dtype)
    h.copy_output(member, out.data_ptr(), out.numel() * out.element_size())
    return out if like.device.type == "cpu" else out.to(like.device)


def _gather_copy(tensor, name, process_set):
    return _blocking("allgather", name, lambda n: allgather_async(tensor, n, process_set))


def allgather(tensor, name=None, process_set=None):
    """Blocking allgather; differentiable (Horovod's rule: the gradient is this rank's rows of
    the average of every rank's output gradient)."""
    if _autograd.wants_grad(tensor):
        return _autograd.Allgather.apply(tensor, name, process_set)
    return _gather_copy(tensor, name, process_set)


# --- broadcast ------------------------------------------------------------------------------

def _broadcast_into(work, root_rank, name, keep, finish, process_set):
    code = _dtype_code(work, "broadcast")
    dev = _device(work)
    h = _kolo.broadcast_async(work.data_ptr(), code, list(work.shape), int(root_rank), name, dev,
                              _set_id(process_set))
    return _register(h, keep, finish, name)


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    """In place: starts copying root's `tensor` into every rank's; returns a handle. With
    `process_set`, root_rank is a job rank that must be in the set (as in Horovod)."""
    name = _name("broadcast", name)
    work = _contiguous_work(tensor)
    finish = _write_back(tensor, work)
    return _broadcast_into(work, root_rank, name, (tensor, work), finish, process_set)


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    """Out of place: synchronize() returns a new tensor holding root's values."""
    name = _name("broadcast", name)
    out = tensor.detach().clone(memory_format=torch.contiguous_format)
    return _broadcast_into(out, root_rank, name, (tensor, out), lambda: out, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=None):
    """In place, blocking."""
    return _blocking("broadcast", name, lambda n: broadcast_async_(tensor, root_rank, n, process_set))


def _broadcast_copy(tensor, root_rank, name, process_set):
    return _blocking("broadcast", name, lambda n: broadcast_async(tensor, root_rank, n, process_set))


def broadcast(tensor, root_rank, name=None, process_set=None):
    """Out of place, blocking; differentiable (Horovod's rule: root's input gets the average
    of every rank's output gradient, the other ranks' inputs zeros)."""
    if _autograd.wants_grad(tensor):
        return _autograd.Broadcast.apply(tensor, root_rank, name, process_set)
    return _broadcast_copy(tensor, root_rank, name, process_set)


# --- barrier --------------------------------------------------------------------------------

def join(device=-1):
    """Horovod's hvd.join(): this rank has run out of data. Until every rank has joined, it
    takes part in the other ranks' collectives without data of its own (an allreduce gets
    the op's identity from it, and an average divides by the ranks that contributed; an
    allgather gets no rows from it; see kolo/collectives.h, kolo::join). Blocks until every
    rank has joined and returns, on every rank, the last rank to join; afterwards every rank
    may submit (and join) again. `device` is accepted for Horovod's sake: kolo's join
    involves no tensor. Collectives on process sets other than the global one are not
    completed for joined ranks; alltoall and reducescatter with a joined rank fail. Ctrl-C
    raises KeyboardInterrupt at once; the rank stays joined and the next join() waits on the
    same join again."""
    _need_init("join")
    if not isinstance(device, int) or isinstance(device, bool):
        raise TypeError("kolo.torch.join: device must be an int (Horovod's device id), got %r" % (device,))
    return _kolo.join()


# --- timeline -------------------------------------------------------------------------------

def start_timeline(file_path, mark_cycles=False):
    """Starts writing kolo's timeline (a Chrome trace, docs/timeline.md) to `file_path` on
    rank 0, as KOLO_TIMELINE does from init; a timeline already being written is closed
    first. Every rank calls it (only rank 0 writes). `mark_cycles`: an instant mark per
    coordinator cycle that did work (KOLO_TIMELINE_MARK_CYCLES)."""
    _need_init("start_timeline")
    if not isinstance(file_path, str) or not file_path:
        raise ValueError("kolo.torch.start_timeline: file_path must be a non-empty string, got %r" % (file_path,))
    _kolo.start_timeline(file_path, bool(mark_cycles))


def stop_timeline():
    """Stops the timeline started by start_timeline() (or KOLO_TIMELINE) and closes its file."""
    _need_init("stop_timeline")
    _kolo.stop_timeline()


def barrier(process_set=None):
    """Returns once every rank (of `process_set`) has called barrier(). Ctrl-C raises
    KeyboardInterrupt at once; the barrier stays submitted and the next barrier() on the same
    set waits on it again."""
    _kolo.barrier("kolo.barrier", _set_id(process_set))


from kolo.torch import autograd as _autograd  # noqa: E402  (it imports this module)

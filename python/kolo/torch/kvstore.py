"""MXNet's KVStore API on torch tensors, over kolo::KVStore (docs/kvstore.md, "From Python").

    import kolo.torch as hvd

    kv = hvd.KVStore.create("dist_sync")      # or kolo.torch.kvstore.create(...)
    # KOLO_NUM_SERVERS=1 mpirun -np 3 python3 train.py: ranks 0, 1 work, rank 2 serves;
    # on a server rank create() serves until every worker has closed, then exits the
    # process (as an MXNet server does); create(..., serve=False) returns the store instead
    # and the program calls kv.run_server() itself.
    kv.init(["w", "b"], [model.weight, model.bias])          # worker 0's values are kept
    kv.set_optimizer(hvd.kvstore.SGD(learning_rate=0.1, momentum=0.9,
                                     rescale_grad=1.0 / kv.num_workers))
    ...
    kv.push(["w", "b"], [model.weight.grad, model.bias.grad])
    kv.pull(["w", "b"], out=[model.weight.data, model.bias.data])
    kv.close()

Types: "local" (one process), "allreduce" (every rank a worker; dist_sync's result through
kolo's allreduce), "dist_sync", "dist_async" (the last KOLO_NUM_SERVERS ranks are servers).
Keys are ints or strs (one kind per store; a str key travels as ``key_id(name)``). Values are
float32 CPU tensors; any other dtype, a GPU tensor or a shape other than init's raises
KoloError naming the key. A key given several values in one push (``push(k, [a, b])`` or a
key repeated in the list) gets their sum, as in MXNet; ``pull(k, out=[a, b])`` fills each.

Workers of a dist store must not call kolo's collectives (the servers never join them);
use ``kv.barrier()`` and ``kv.sum_over_workers()``. Thread safety: one thread per store.
"""
import ctypes
import re
import sys
import zlib

import torch

from kolo import _kolo
from kolo.torch.mpi_ops import _device, _dtype_code

KoloError = _kolo.KoloError


# --- optimizers (MXNet's update rules; run where the weights live) -----------------------------

class CosineScheduler:
    """MXNet's lr_scheduler.CosineScheduler, run where the weights live (by the number u of
    the update applied to a key; in dist_async each worker's push is one update): linear
    warm-up from warmup_begin_lr over warmup_steps updates, then a cosine from the
    optimizer's learning_rate down to final_lr at max_update, then final_lr. base_lr is
    replaced by the optimizer's learning_rate, as in MXNet."""

    def __init__(self, max_update, base_lr=0.01, final_lr=0.0, warmup_steps=0, warmup_begin_lr=0.0,
                 warmup_mode="linear"):
        if warmup_mode != "linear":
            raise ValueError("kolo.torch.kvstore.CosineScheduler: only warmup_mode='linear' is supported")
        self.max_update, self.base_lr, self.final_lr = int(max_update), base_lr, final_lr
        self.warmup_steps, self.warmup_begin_lr = int(warmup_steps), warmup_begin_lr


class SGD:
    """MXNet's SGD: g = clip(rescale_grad*grad) + wd*w; mom = momentum*mom - lr*g; w += mom
    (without momentum: w -= lr*g). clip_gradient None: no clipping. lookahead (dist_async,
    momentum > 0): pulls return w + momentum*mom (docs/kvstore.md, "dist_async accuracy").
    lr_scheduler: None (constant rate) or a CosineScheduler."""
    kind = "sgd"

    def __init__(self, learning_rate=0.01, momentum=0.0, wd=0.0, rescale_grad=1.0, clip_gradient=None,
                 lookahead=False, lr_scheduler=None):
        self.learning_rate, self.momentum, self.wd = learning_rate, momentum, wd
        self.rescale_grad, self.clip_gradient, self.lookahead = rescale_grad, clip_gradient, lookahead
        self.beta1, self.beta2, self.epsilon = 0.9, 0.999, 1e-8
        if lr_scheduler is not None and not isinstance(lr_scheduler, CosineScheduler):
            raise TypeError("kolo.torch.kvstore: lr_scheduler must be a CosineScheduler (or None), got %s"
                            % type(lr_scheduler).__name__)
        self.lr_scheduler = lr_scheduler

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % kv for kv in sorted(vars(self).items())))


class Adam(SGD):
    """MXNet's Adam: g as for SGD; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
    w -= lr*sqrt(1-b2^t)/(1-b1^t) * m/(sqrt(v)+epsilon)."""
    kind = "adam"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, wd=0.0, rescale_grad=1.0,
                 clip_gradient=None, lr_scheduler=None):
        super().__init__(learning_rate, 0.0, wd, rescale_grad, clip_gradient, lr_scheduler=lr_scheduler)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon


_OPTIMIZERS = {"sgd": SGD, "adam": Adam}


def create_optimizer(name, **kwargs):
    """An optimizer by MXNet's name ("sgd", "adam") and its keyword arguments."""
    cls = _OPTIMIZERS.get(str(name).lower())
    if cls is None:
        raise ValueError("kolo.torch.kvstore: unknown optimizer %r (expected one of %s)" % (name, sorted(_OPTIMIZERS)))
    return cls(**kwargs)


# --- keys and values ---------------------------------------------------------------------------

def key_id(name):
    """The int a str key travels as: CRC-32 of its UTF-8 bytes, in [0, 2^31). The same on
    every process, whatever order the keys are initialised in."""
    return zlib.crc32(name.encode("utf-8")) & 0x7FFFFFFF


def _member(t, what):
    """(ptr, dtype code, shape, device) of a tensor; kolo's C++ side checks dtype and device."""
    return (t.data_ptr(), _dtype_code(t, "KVStore." + what), list(t.shape), _device(t))


def _flat_tensor(ptr, size):
    """A float32 tensor over `size` floats at `ptr` (no copy); valid during an updater call."""
    if size == 0:
        return torch.empty(0, dtype=torch.float32)
    return torch.frombuffer((ctypes.c_float * size).from_address(ptr), dtype=torch.float32)


class KVStore:
    """A key-value store of parameters (MXNet's ``mx.kv.KVStore``). Create with
    ``KVStore.create(name)``; see the module's documentation."""

    @staticmethod
    def create(name="local", serve=True):
        """A store of type `name` ("local", "allreduce", "dist_sync", "dist_async"; "dist" is
        dist_sync). Collective over every rank except for "local"; starts kolo if needed.
        On a server rank of a dist type with serve=True this never returns: it serves until
        every worker has closed, shuts kolo down and exits the process with status 0 (an
        error exits with status 1 after printing it)."""
        if name != "local" and not _kolo.is_initialized():
            _kolo.init()
        kv = KVStore(_kolo.KVStore.create(name))
        if serve and kv.is_server:
            try:
                kv.run_server()
                kv.close()
                _kolo.shutdown()
            except KoloError as e:
                print("kolo.torch.KVStore server (rank %d): %s" % (_kolo.rank(), e), file=sys.stderr, flush=True)
                sys.exit(1)
            sys.exit(0)
        return kv

    def __init__(self, impl):
        self._kv = impl
        self._str_keys = None  # None until the first key; then True (str) or False (int)
        self._names = {}       # key_id -> name, for str keys
        self._shapes = {}      # key -> shape given at init (to shape updater tensors)

    # -- attributes (rank: this worker's rank among the workers, its job rank; -1 on a server)
    type = property(lambda self: self._kv.type)
    rank = property(lambda self: self._kv.rank)
    num_workers = property(lambda self: self._kv.num_workers)
    num_servers = property(lambda self: self._kv.num_servers)
    is_server = property(lambda self: self._kv.is_server)

    # -- data
    def init(self, key, value):
        """Stores `value` under `key` (lists: one value per key). Every worker calls it with
        the same keys and shapes; worker 0's values are kept."""
        keys, values = self._pairs("init", key, value, allow_many=False)
        self._call(self._kv.init, [self._id(k, register=True) for k in keys],
                   [_member(v.detach().contiguous(), "init") for v in values])
        for k, v in zip(keys, values):
            self._shapes[self._id(k)] = tuple(v.shape)

    def push(self, key, value, priority=0):
        """Pushes `value` (a gradient) for `key`; several values of one key are summed.
        Returns once the store has taken it (dist_sync: once the round's update is applied)."""
        keys, values = self._pairs("push", key, value)
        self._call(self._kv.push, [self._id(k) for k in keys],
                   [_member(v.detach().contiguous(), "push") for v in values], priority)

    def pull(self, key, out=None, priority=0):
        """Writes the value of `key` into `out` (lists: per key; a list of tensors for one
        key: each gets the value)."""
        if out is None:
            raise ValueError("kolo.torch.KVStore.pull: out= is required (the tensors to write the values into)")
        keys, outs = self._pairs("pull", key, out)
        staged = [o if o.is_contiguous() else torch.empty_like(o, memory_format=torch.contiguous_format)
                  for o in outs]
        self._call(self._kv.pull, [self._id(k) for k in keys], [_member(s.detach(), "pull") for s in staged],
                   priority)
        for o, s in zip(outs, staged):
            if s is not o:
                o.copy_(s)

    def pushpull(self, key, value, out=None, priority=0):
        """push(key, value) then pull(key, out); out None: into `value` itself."""
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)

    # -- optimizer
    def set_optimizer(self, optimizer):
        """Runs `optimizer` (SGD, Adam, or create_optimizer(...)) where the weights live: on
        the servers (dist types; worker 0's is sent) or on every worker. Replaces an updater."""
        if isinstance(optimizer, str):
            optimizer = create_optimizer(optimizer)
        if not isinstance(optimizer, SGD):
            raise TypeError("kolo.torch.KVStore.set_optimizer: expected kolo.torch.kvstore.SGD or Adam (or "
                            "create_optimizer(name, ...)), got %s" % type(optimizer).__name__)
        o = optimizer
        clip = -1.0 if o.clip_gradient is None else float(o.clip_gradient)
        s = getattr(o, "lr_scheduler", None)
        schedule = () if s is None else ("cosine", s.warmup_steps, float(s.warmup_begin_lr), s.max_update,
                                         float(s.final_lr))
        self._call(self._kv.set_optimizer, o.kind, float(o.learning_rate), float(o.momentum), float(o.wd),
                   float(o.rescale_grad), clip, float(o.beta1), float(o.beta2), float(o.epsilon),
                   bool(o.lookahead), *schedule)

    def set_updater(self, updater):
        """MXNet's updater(key, grad, weight): updates `weight` in place from `grad` (the
        summed push). Runs on each worker; "local" and "allreduce" only (a function cannot be
        sent to a server: pass it to run_server() there)."""
        self._call(self._kv.set_updater, self._wrap(updater))

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Worker 0 writes the optimizer state of every key, wherever it lives (collective
        over the workers). dump_optimizer: not supported (the settings are not saved)."""
        if dump_optimizer:
            raise ValueError("kolo.torch.KVStore.save_optimizer_states: dump_optimizer=True is not supported; "
                             "call set_optimizer again after loading")
        self._call(self._kv.save_optimizer_states, str(fname))

    def load_optimizer_states(self, fname):
        """Loads a file written by save_optimizer_states (collective over the workers)."""
        self._call(self._kv.load_optimizer_states, str(fname))

    # -- coordination
    def barrier(self):
        """Returns once every worker has called it (servers take no part)."""
        self._call(self._kv.barrier)

    _barrier = barrier  # MXNet 1.x's name

    def sum_over_workers(self, values):
        """The sum over the workers of a list of floats (metrics)."""
        return self._call(self._kv.sum_over_workers, [float(v) for v in values])

    def run_server(self, updater=None):
        """Server ranks: serve until every worker has closed. `updater(key, grad, weight)`,
        when given, replaces the optimizer; it gets 1-D float32 tensors of the slice of the key
        this server holds, and for str keys the key_id."""
        self._call(self._kv.run_server, self._wrap(updater, flat=True))

    def close(self):
        """Workers: tell the servers this worker is done, then wait for every rank (collective).
        Idempotent; also run when the store is garbage-collected."""
        self._call(self._kv.close)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- helpers
    def _wrap(self, updater, flat=False):
        if updater is None:
            return None

        def call(key, offset, grad_ptr, weight_ptr, size):
            grad, weight = _flat_tensor(grad_ptr, size), _flat_tensor(weight_ptr, size)
            shape = self._shapes.get(key)
            if not flat and offset == 0 and shape is not None and grad.numel() == _numel(shape):
                grad, weight = grad.view(shape), weight.view(shape)
            updater(self._names.get(key, key), grad, weight)
        return call

    def _id(self, key, register=False):
        is_str = isinstance(key, str)
        if not is_str and not isinstance(key, int):
            raise TypeError("kolo.torch.KVStore: keys must be int or str, got %s" % type(key).__name__)
        if self._str_keys is None:
            self._str_keys = is_str
        elif self._str_keys != is_str:
            raise TypeError("kolo.torch.KVStore: key %r mixes %s keys into a store of %s keys" %
                            (key, "str" if is_str else "int", "str" if self._str_keys else "int"))
        if not is_str:
            if not -2**31 <= key < 2**31:
                raise ValueError("kolo.torch.KVStore: int key %d is outside 32 bits" % key)
            return key
        kid = key_id(key)
        other = self._names.get(kid)
        if register and other is not None and other != key:
            raise ValueError("kolo.torch.KVStore: keys %r and %r have the same key_id %d; rename one" %
                             (other, key, kid))
        if register or other is None:
            self._names[kid] = key
        return kid

    @staticmethod
    def _pairs(what, key, value, allow_many=True):
        """Flattens MXNet's forms into parallel lists of keys and tensors."""
        if isinstance(key, (list, tuple)):
            if not isinstance(value, (list, tuple)) or len(value) != len(key):
                raise ValueError("kolo.torch.KVStore.%s: %d keys need a list of %d values" % (what, len(key), len(key)))
            pairs = list(zip(key, value))
        else:
            pairs = [(key, value)]
        keys, values = [], []
        for k, v in pairs:
            many = isinstance(v, (list, tuple))
            if many and not allow_many:
                raise ValueError("kolo.torch.KVStore.%s: one value per key (key %r got a list)" % (what, k))
            for t in (v if many else [v]):
                keys.append(k)
                values.append(t)
        return keys, values

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except KoloError as e:
            if not self._names:
                raise
            # Name str keys in kolo's message ("key 123456" -> "key 'fc1.weight' (id 123456)").
            text = re.sub(r"key (\d+)", lambda m: ("key %r (id %s)" % (self._names[int(m.group(1))], m.group(1))
                                                   if int(m.group(1)) in self._names else m.group(0)), str(e))
            err = KoloError(text)
            err.code = getattr(e, "code", None)
            raise err from None


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def create(name="local", serve=True):
    """kolo.torch.kvstore.create(name): KVStore.create, MXNet's ``mx.kv.create``."""
    return KVStore.create(name, serve)

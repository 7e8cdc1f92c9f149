"""Broadcasting model and optimizer state, and Python objects, as horovod.torch does.

Every function here is collective: all ranks call it, in the same order."""
import pickle

import torch

from kolo.torch import mpi_ops
from kolo.torch.mpi_ops import (allgather_async, broadcast_, broadcast_async_, rank,
                                synchronize)


def _named_tensors(params):
    if isinstance(params, dict):
        return sorted(params.items())
    out = []
    for i, p in enumerate(params):
        if isinstance(p, tuple):
            out.append(p)
        else:
            out.append(("%d" % i, p))
    return out


def broadcast_parameters(params, root_rank):
    """Copies root's tensors into every rank's, in place. `params`: a state_dict (dict of
    name -> tensor; non-tensor entries are skipped), model.named_parameters(), or a list of
    tensors or (name, tensor) pairs. All broadcasts go out at once (kolo fuses them)."""
    handles = []
    for name, p in _named_tensors(params):
        if p is None or not torch.is_tensor(p):
            continue
        handles.append(broadcast_async_(p.data if isinstance(p, torch.nn.Parameter) else p, root_rank,
                                        name="broadcast_parameters.%s" % name))
    _synchronize_all(handles)


def _synchronize_all(handles):
    """Waits for every handle; raises the first error after all completed."""
    first = None
    for h in handles:
        try:
            synchronize(h)
        except Exception as e:  # noqa: BLE001 -- re-raised below
            if first is None:
                first = e
    if first is not None:
        raise first


def broadcast_optimizer_state(optimizer, root_rank):
    """Makes every rank's optimizer state equal to root's: hyper-parameters of every param
    group (lr, momentum, betas, ...), and per-parameter state (SGD momentum buffers, Adam
    moments and step counts, ...), including state that a rank does not have yet (an
    optimizer that never stepped gets root's state created for it). Root's layout travels
    as a pickled object, the tensors by in-place broadcast."""
    sd = optimizer.state_dict()
    if not sd["state"]:
        # As Horovod's dummy step leaves them: a zero gradient for every trainable parameter
        # that has none (scripts read p.grad right after this call).
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and p.grad is None:
                    p.grad = torch.zeros_like(p)
    me = rank()
    layout = None
    if me == root_rank:
        layout = {
            "param_groups": sd["param_groups"],
            "state": {pid: {k: (("tensor", tuple(v.shape), v.dtype) if torch.is_tensor(v) else ("value", v))
                            for k, v in st.items()}
                      for pid, st in sd["state"].items()},
        }
    layout = broadcast_object(layout, root_rank, name="broadcast_optimizer_state.layout")
    new_state = {}
    handles = []
    for pid in sorted(layout["state"], key=str):
        local = sd["state"].get(pid, {})
        entry = {}
        for key in sorted(layout["state"][pid], key=str):
            kind, *rest = layout["state"][pid][key]
            if kind == "value":
                entry[key] = rest[0]
                continue
            shape, dtype = rest
            t = local.get(key)
            if not (torch.is_tensor(t) and tuple(t.shape) == shape and t.dtype == dtype):
                t = torch.zeros(shape, dtype=dtype)
            entry[key] = t
            handles.append(broadcast_async_(t, root_rank, name="broadcast_optimizer_state.%s.%s" % (pid, key)))
        new_state[pid] = entry
    _synchronize_all(handles)
    if me != root_rank:
        optimizer.load_state_dict({"state": new_state, "param_groups": layout["param_groups"]})


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """Returns root's `obj` on every rank (pickled; other ranks' `obj` is ignored).
    name=None gives an automatic name (see kolo.torch.mpi_ops). With `process_set`, root_rank
    is a job rank in the set and only its members call this."""
    name = mpi_ops._name("broadcast_object", name)
    if rank() == root_rank:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        payload = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
        size = torch.tensor([len(data)], dtype=torch.int64)
    else:
        size = torch.zeros(1, dtype=torch.int64)
    broadcast_(size, root_rank, name=name + ".size", process_set=process_set)
    if rank() != root_rank:
        payload = torch.empty(int(size.item()), dtype=torch.uint8)
    broadcast_(payload, root_rank, name=name + ".data", process_set=process_set)
    if rank() == root_rank:
        return obj
    return pickle.loads(payload.numpy().tobytes())


def allgather_object(obj, name=None, process_set=None):
    """Returns the list of every rank's `obj`, in rank order (pickled); with `process_set`,
    of every member's, in set-rank order."""
    name = mpi_ops._name("allgather_object", name)
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    payload = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    sizes = synchronize(allgather_async(torch.tensor([len(data)], dtype=torch.int64), name=name + ".size",
                                        process_set=process_set))
    gathered = synchronize(allgather_async(payload, name=name + ".data", process_set=process_set)).numpy().tobytes()
    out, at = [], 0
    for n in sizes.tolist():
        out.append(pickle.loads(gathered[at:at + n]))
        at += n
    return out

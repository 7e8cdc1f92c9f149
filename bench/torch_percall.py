#!/usr/bin/env python3
"""What one collective costs a PyTorch user: kolo.torch beside torch.distributed (gloo) in the
same processes, for small tensors where the per-call cost is the whole cost.

    bench/torch_percall.sh            # mpirun; runs kolo's C++ figures for the same first

Part "lone": one allreduce at a time (Average of float32) of 1 element, 1 KB and 4 KB, four
ways: in place blocking (allreduce_), out of place blocking (allreduce), and async then
synchronize (allreduce_async_ + synchronize); gloo: all_reduce (+ div_), the same on a clone,
and all_reduce(async_op=True).wait() (+ div_). Per call: median over rounds of `calls` calls.
Part "burst": 1,000 gradients of 4 KB per step: through DistributedOptimizer's hooks
(backward + synchronize(), the local backward alone printed beside it), one grouped_allreduce_,
1,000 allreduce_async_ then 1,000 synchronize, and gloo one all_reduce(async_op) per tensor
and DDP's way (flatten, one all_reduce, unflatten). Part "split" (rank 0 prints): where a
lone allreduce_async_ + synchronize spends its time in Python (perf_counter_ns stamps of the
steps, from kolo.torch's own functions called one by one).
gloo rendezvous: MASTER_ADDR/MASTER_PORT (default 127.0.0.1:29512), rank and size from
OMPI_COMM_WORLD_RANK/SIZE.
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

import kolo.torch as hvd


def per_call(fn, calls, rounds, warmup=1):
    """Median over `rounds` of the mean seconds per call of `calls` calls of fn."""
    for _ in range(warmup):
        for _ in range(calls):
            fn()
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls)
    return statistics.median(out)


def part_lone(args):
    n = dist.get_world_size()
    rows = []
    for label, elems in (("1 element", 1), ("1 KB", 256), ("4 KB", 1024)):
        t = torch.ones(elems)

        def k_inplace():
            hvd.allreduce_(t)

        def k_out():
            hvd.allreduce(t)

        def k_async():
            hvd.synchronize(hvd.allreduce_async_(t))

        def g_inplace():
            dist.all_reduce(t)
            t.div_(n)

        def g_out():
            o = t.clone()
            dist.all_reduce(o)
            o.div_(n)

        def g_async():
            dist.all_reduce(t, async_op=True).wait()
            t.div_(n)

        for what, k, g in (("allreduce_", k_inplace, g_inplace), ("allreduce", k_out, g_out),
                           ("async+synchronize", k_async, g_async)):
            # Alternate kolo and gloo rounds so both see the same load.
            ks, gs = [], []
            for _ in range(args.rounds):
                ks.append(per_call(k, args.calls, 1))
                gs.append(per_call(g, args.calls, 1))
            rows.append((label, what, statistics.median(ks), statistics.median(gs)))
    if hvd.rank() == 0:
        print("lone allreduce, float32 Average, %d ranks (us per call, median of %d rounds x %d calls)"
              % (n, args.rounds, args.calls))
        print("%-10s %-18s %10s %10s %10s" % ("size", "call", "kolo", "gloo", "kolo/gloo"))
        for label, what, k, g in rows:
            print("%-10s %-18s %10.1f %10.1f %10.2f" % (label, what, k * 1e6, g * 1e6, k / g))


class Burst(torch.nn.Module):
    """1,000 parameters of 1024 float32 (4 KB) each, a cheap forward."""

    def __init__(self, count, elems):
        super().__init__()
        self.p = torch.nn.ParameterList([torch.nn.Parameter(torch.full((elems,), 0.5)) for _ in range(count)])

    def forward(self, x):
        return sum((p * x).sum() for p in self.p)


def part_burst(args):
    n = dist.get_world_size()
    count, elems = args.burst, 1024
    x = torch.ones(elems)
    local = Burst(count, elems)
    model = Burst(count, elems)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.0),
                                   named_parameters=model.named_parameters())
    grads = [torch.ones(elems) for _ in range(count)]
    names = ["burst.%d" % i for i in range(count)]
    flat = torch.empty(count * elems)

    def backward_local():
        local.zero_grad()
        local(x).backward()

    def optimizer_step():
        opt.zero_grad()
        model(x).backward()
        opt.synchronize()

    def grouped():
        hvd.grouped_allreduce_(grads, name="burst.grouped")

    def per_tensor():
        hs = [hvd.allreduce_async_(g, name=m) for g, m in zip(grads, names)]
        for h in hs:
            hvd.synchronize(h)

    def gloo_per_tensor():
        works = [dist.all_reduce(g, async_op=True) for g in grads]
        for w, g in zip(works, grads):
            w.wait()
            g.div_(n)

    def gloo_flat():
        torch.cat(grads, out=flat)
        dist.all_reduce(flat)
        flat.div_(n)
        at = 0
        for g in grads:
            g.copy_(flat[at:at + elems])
            at += elems

    cases = [("local backward (no comm)", backward_local), ("DistributedOptimizer bwd+sync", optimizer_step),
             ("grouped_allreduce_", grouped), ("allreduce_async_ x N + sync", per_tensor),
             ("gloo all_reduce x N (async)", gloo_per_tensor), ("gloo flat (DDP's way)", gloo_flat)]
    times = {label: [] for label, _ in cases}
    for f in (f for _, f in cases):
        f()
    for _ in range(args.burst_rounds):
        for label, f in cases:
            t0 = time.perf_counter()
            for _ in range(args.burst_steps):
                f()
            times[label].append((time.perf_counter() - t0) / args.burst_steps)
    med = {label: statistics.median(v) for label, v in times.items()}
    if hvd.rank() == 0:
        best_gloo = min(med["gloo all_reduce x N (async)"], med["gloo flat (DDP's way)"])
        print("burst of %d x 4 KB float32 Average, %d ranks (ms per step, median of %d rounds x %d steps)"
              % (count, n, args.burst_rounds, args.burst_steps))
        print("%-32s %10s %14s %14s" % ("case", "ms", "us/tensor", "/best gloo"))
        for label, _ in cases:
            print("%-32s %10.3f %14.2f %14.2f" % (label, med[label] * 1e3, med[label] * 1e6 / count,
                                                  med[label] / best_gloo))
        print("DistributedOptimizer minus local backward: %.3f ms (%.2f us/tensor)"
              % ((med["DistributedOptimizer bwd+sync"] - med["local backward (no comm)"]) * 1e3,
                 (med["DistributedOptimizer bwd+sync"] - med["local backward (no comm)"]) * 1e6 / count))


def part_split(args):
    """Stamps of allreduce_async_'s steps (kolo.torch's internals, called in its order)."""
    from kolo import _kolo
    from kolo.torch import mpi_ops as m
    t = torch.ones(1024)
    stamps = {k: [] for k in ("python prepare", "_kolo.allreduce_async", "register", "wait", "finish+pop")}
    ns = time.perf_counter_ns
    for i in range(args.calls * args.rounds):
        a = ns()
        op = m._op_code(None, None, "allreduce_async_")
        name = m._name("allreduce", None)
        work = m._contiguous_work(t)
        finish = m._write_back(t, work)
        code = m._dtype_code(work, "allreduce")
        dev = m._device(work)
        shape = list(work.shape)
        sid = m._set_id(None)
        b = ns()
        h = _kolo.allreduce_async(work.data_ptr(), code, shape, name, op, 1.0, 1.0, dev, sid)
        c = ns()
        hid = m._register(h, (t, work), finish)
        d = ns()
        rec = m._record(hid, "synchronize")
        rec.handle.wait()
        e = ns()
        rec.finish()
        with m._handles_lock:
            m._handles.pop(hid, None)
        f = ns()
        for k, v in zip(stamps, (b - a, c - b, d - c, e - d, f - e)):
            stamps[k].append(v)
    if hvd.rank() == 0:
        print("where allreduce_async_ + synchronize of 4 KB spends its time, rank 0 (median ns)")
        for k, v in stamps.items():
            print("  %-24s %10.0f" % (k, statistics.median(v)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--part", choices=["lone", "burst", "split", "all"], default="all")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--burst", type=int, default=1000)
    p.add_argument("--burst-steps", type=int, default=5)
    p.add_argument("--burst-rounds", type=int, default=5)
    args = p.parse_args()

    hvd.init()
    torch.set_num_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29512")
    dist.init_process_group("gloo", rank=int(os.environ["OMPI_COMM_WORLD_RANK"]),
                            world_size=int(os.environ["OMPI_COMM_WORLD_SIZE"]))
    assert dist.get_rank() == hvd.rank()
    if args.part in ("lone", "all"):
        part_lone(args)
    if args.part in ("burst", "all"):
        part_burst(args)
    if args.part in ("split", "all"):
        part_split(args)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

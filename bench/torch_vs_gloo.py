#!/usr/bin/env python3
"""kolo.torch beside torch.distributed (gloo backend) in the same run, same processes.

    bench/torch_vs_gloo.sh            # mpirun -np 2, see there for the knobs

Part 1, allreduce time (Average of float32) for: 4 KB, 64 MB, and ResNet-50's gradient set
(161 tensors, 25.6 M values; shapes from the ResNet-50 of examples/pytorch). kolo submits
every tensor with allreduce_async_ and synchronizes them; gloo is timed two ways: one
all_reduce per tensor (async, then wait all), and DDP's way (gradients packed into 25 MB
buckets in reverse order, one all_reduce per bucket, unpacked) — the latter is what DDP's
step costs on top of the backward pass.
Part 2, training throughput of the same model and batch: kolo's DistributedOptimizer vs
torch's DistributedDataParallel(gloo), alternating timed rounds so both see the same load.
Prints each figure with kolo/gloo ratios. gloo rendezvous: MASTER_ADDR/MASTER_PORT (defaults
127.0.0.1:29511), rank and size from Open MPI's OMPI_COMM_WORLD_RANK/SIZE.
"""
import argparse
import importlib.util
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import kolo.torch as hvd

HERE = os.path.dirname(os.path.abspath(__file__))


def load_example(name):
    path = os.path.join(HERE, "..", "examples", "pytorch", name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def timed(fn, reps, warmup=2):
    """Median seconds of `reps` calls, each ended by a barrier-free wait (fn waits itself)."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def kolo_allreduce(tensors):
    names = ["bench.%d" % i for i in range(len(tensors))]

    def run():
        hs = [hvd.allreduce_async_(t, name=n, op=hvd.Average) for t, n in zip(tensors, names)]
        for h in hs:
            hvd.synchronize(h)
    return run


def gloo_allreduce(tensors):
    n = dist.get_world_size()

    def run():
        works = [dist.all_reduce(t, async_op=True) for t in tensors]
        for w, t in zip(works, tensors):
            w.wait()
            t.div_(n)
    return run


def gloo_buckets(tensors, bucket_bytes=25 << 20):
    """DDP's reduction: reverse order, 25 MB buckets, flatten, allreduce, divide, unflatten."""
    n = dist.get_world_size()
    buckets, cur, size = [], [], 0
    for t in reversed(tensors):
        cur.append(t)
        size += t.numel() * t.element_size()
        if size >= bucket_bytes:
            buckets.append(cur)
            cur, size = [], 0
    if cur:
        buckets.append(cur)
    flat = [torch.empty(sum(t.numel() for t in b)) for b in buckets]

    def run():
        works = []
        for b, f in zip(buckets, flat):
            torch.cat([t.view(-1) for t in b], out=f)
            works.append(dist.all_reduce(f, async_op=True))
        for b, f, w in zip(buckets, flat, works):
            w.wait()
            f.div_(n)
            at = 0
            for t in b:
                t.view(-1).copy_(f[at:at + t.numel()])
                at += t.numel()
    return run


def part_allreduce(args, resnet50):
    shapes = [p.shape for p in resnet50.parameters()]
    assert len(shapes) == 161 and sum(s.numel() for s in shapes) == 25557032
    cases = [("4 KB", [torch.ones(1024)], 200),
             ("64 MB", [torch.ones(16 << 20)], args.reps_large),
             ("ResNet-50 grads (161)", [torch.ones(s) for s in shapes], args.reps_large)]
    rows = []
    for label, tensors, reps in cases:
        k = timed(kolo_allreduce(tensors), reps)
        g = timed(gloo_allreduce(tensors), reps)
        b = timed(gloo_buckets(tensors), reps) if len(tensors) > 1 else g
        rows.append((label, k, g, b))
    if hvd.rank() == 0:
        print("allreduce, float32 Average, %d ranks (median seconds)" % hvd.size())
        print("%-24s %12s %12s %12s %10s" % ("case", "kolo", "gloo", "gloo-ddp", "kolo/best"))
        for label, k, g, b in rows:
            print("%-24s %12.6f %12.6f %12.6f %10.3f" % (label, k, g, b, k / min(g, b)))


def part_training(args, models):
    torch.manual_seed(0)
    data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    target = torch.randint(0, 1000, (args.batch_size,))

    m_kolo = models[args.model]()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m_kolo.parameters(), lr=0.01, momentum=0.9),
                                   named_parameters=m_kolo.named_parameters())
    hvd.broadcast_parameters(m_kolo.state_dict(), 0)
    m_ddp = torch.nn.parallel.DistributedDataParallel(models[args.model]())
    opt_ddp = torch.optim.SGD(m_ddp.parameters(), lr=0.01, momentum=0.9)

    def step_kolo():
        opt.zero_grad()
        F.cross_entropy(m_kolo(data), target).backward()
        opt.step()

    def step_ddp():
        opt_ddp.zero_grad()
        F.cross_entropy(m_ddp(data), target).backward()
        opt_ddp.step()

    for f in (step_kolo, step_ddp):
        f()
        f()
    tk, td = [], []
    for _ in range(args.rounds):
        for f, out in ((step_kolo, tk), (step_ddp, td)):
            t0 = time.perf_counter()
            for _ in range(args.steps):
                f()
            out.append((time.perf_counter() - t0) / args.steps)
    k, d = statistics.median(tk), statistics.median(td)
    if hvd.rank() == 0:
        print("training %s, batch %d per rank, %dx%d, %d ranks, %d threads per rank (median step s)" %
              (args.model, args.batch_size, args.image_size, args.image_size, hvd.size(), args.threads))
        print("%-24s %12s %12s %12s" % ("", "kolo", "ddp-gloo", "kolo/ddp"))
        print("%-24s %12.4f %12.4f %12.3f" % ("step seconds", k, d, k / d))
        print("%-24s %12.2f %12.2f %12.3f" % ("img/s (all ranks)", args.batch_size * hvd.size() / k,
                                               args.batch_size * hvd.size() / d, d / k))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--part", choices=["allreduce", "training", "all"], default="all")
    p.add_argument("--reps-large", type=int, default=10)
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()

    hvd.init()
    torch.set_num_threads(args.threads)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    dist.init_process_group("gloo", rank=int(os.environ["OMPI_COMM_WORLD_RANK"]),
                            world_size=int(os.environ["OMPI_COMM_WORLD_SIZE"]))
    assert dist.get_rank() == hvd.rank()
    models = load_example("synthetic_benchmark").MODELS
    if args.part in ("allreduce", "all"):
        part_allreduce(args, models["resnet50"]())
    if args.part in ("training", "all"):
        part_training(args, models)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Fashion-MNIST with PyTorch, distributed by kolo.torch — a Horovod script whose only change
is its import line.

    mpirun -np 2 python3 examples/pytorch/fashion_mnist.py --batch-size 32
    mpirun -np 1 python3 examples/pytorch/fashion_mnist.py --batch-size 64   # same global batch

(PYTHONPATH=build/python when kolo is not installed.) Each rank trains on its shard of every
epoch's shuffled order (DistributedSampler: rank r takes positions r, r+N, ...), so N ranks
with batch b see exactly the samples one process with batch N*b sees, step by step: the
accuracies agree (docs/pytorch.md). The learning rate is not scaled with N for that reason;
Horovod's examples scale it when they keep the per-rank batch instead.

Data: Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist), IDX files, gzip.
"""
import argparse
import gzip
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import kolo.torch as hvd

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path, magic):
    """An IDX file: big-endian magic (0x801 labels, 0x803 images), dims, then uint8 data."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    got = int.from_bytes(raw[0:4], "big")
    if got != magic:
        raise ValueError("%s: IDX magic 0x%x, expected 0x%x" % (path, got, magic))
    ndim = magic & 0xFF
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError("%s: %d bytes of data for dims %s" % (path, data.size, dims))
    return data.reshape(dims)


def load(split, data_dir):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz"), 0x803)
    y = read_idx(os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz"), 0x801)
    x = torch.from_numpy(x.astype(np.float32) / 255.0).sub_(0.2860).div_(0.3530).unsqueeze(1)
    return TensorDataset(x, torch.from_numpy(y.astype(np.int64)))


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def metric_average(value, name):
    """The mean over ranks of a per-rank scalar (each rank's test shard is the same size)."""
    return hvd.allreduce(torch.tensor(value, dtype=torch.float64), name=name).item()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--data-dir", default=DATA)
    p.add_argument("--fp16-allreduce", action="store_true")
    args = p.parse_args()

    hvd.init()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    train, test = load("train", args.data_dir), load("test", args.data_dir)
    train_sampler = DistributedSampler(train, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True,
                                       seed=args.seed)
    test_sampler = DistributedSampler(test, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False)
    train_loader = DataLoader(train, batch_size=args.batch_size, sampler=train_sampler)
    test_loader = DataLoader(test, batch_size=1000, sampler=test_sampler)

    model = LeNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression)
    # Cosine decay to zero over the run: the last epochs settle, so the final accuracy does
    # not depend on where in its fluctuation a run stops.
    total = args.epochs * len(train_loader)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * s / total)))

    for epoch in range(1, args.epochs + 1):
        model.train()
        train_sampler.set_epoch(epoch)
        t0 = time.perf_counter()
        for x, y in train_loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            schedule.step()
        seconds = time.perf_counter() - t0

        model.eval()
        loss, correct, count = 0.0, 0, 0
        with torch.no_grad():
            for x, y in test_loader:
                out = model(x)
                loss += F.cross_entropy(out, y, reduction="sum").item()
                correct += (out.argmax(1) == y).sum().item()
                count += len(y)
        loss = metric_average(loss / count, "avg_loss")
        accuracy = metric_average(correct / count, "avg_accuracy")
        if hvd.rank() == 0:
            print("epoch %d: test loss %.4f accuracy %.4f (%d ranks x batch %d, %.1f s)" %
                  (epoch, loss, accuracy, hvd.size(), args.batch_size, seconds), flush=True)


if __name__ == "__main__":
    main()

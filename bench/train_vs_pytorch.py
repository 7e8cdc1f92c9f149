#!/usr/bin/env python3
"""PyTorch (CPU) side of bench/train_vs_pytorch.sh: training images/s of the same LeNet-5
and ResNet-20 that kolo's nn/ builds, on synthetic data, same batch and thread count.

Prints one JSON object per line: {"framework": "pytorch", "model": ..., "images_per_sec": ...,
"images_per_cpu_sec": ...} (the second over process CPU time, all threads).
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def lenet(classes=10):
    # Same layers as kolo::nn "lenet": conv6-5x5 pad 2, pool, conv16-5x5, pool, fc120, fc84, fc.
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, classes))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:  # kolo's option-B projection shortcut
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class CifarResNet(nn.Module):
    def __init__(self, depth=20, in_channels=3, classes=10):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        blocks, cin = [], 16
        for stage in range(3):
            cout = 16 << stage
            for b in range(n):
                blocks.append(BasicBlock(cin, cout, 2 if (b == 0 and stage > 0) else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.blocks(F.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def measure(model, shape, batch, steps, warmup):
    torch.manual_seed(0)
    data = torch.randn(batch * 8, *shape)
    labels = torch.randint(0, 10, (batch * 8,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    model.train()

    def step(i):
        j = (i % 8) * batch
        x, y = data[j:j + batch], labels[j:j + batch]
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    for i in range(warmup):
        step(i)
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(steps):
        step(i)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return batch * steps / wall, batch * steps / cpu


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["lenet", "resnet20"], required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    if a.model == "lenet":
        model, shape = lenet(), (1, 28, 28)
    else:
        model, shape = CifarResNet(20), (3, 32, 32)
    params = sum(t.numel() for t in model.parameters())
    ips, ips_cpu = measure(model, shape, a.batch_size, a.steps, a.warmup)
    print(json.dumps({"framework": "pytorch", "version": torch.__version__, "model": a.model,
                      "batch_size": a.batch_size, "threads": a.threads, "parameters": params,
                      "mkldnn": torch.backends.mkldnn.is_available(),
                      "images_per_sec": round(ips, 1),
                      "images_per_cpu_sec": round(ips_cpu, 1)}))


if __name__ == "__main__":
    main()

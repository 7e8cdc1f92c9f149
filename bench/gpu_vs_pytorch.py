#!/usr/bin/env python3
"""PyTorch (CUDA) side of bench/gpu_vs_pytorch.sh: training images/s of the same LeNet-5
and ResNet-50 that kolo's nn/gpu builds, synthetic data, same batch, one GPU.

Like kolo-bench-train --device gpu, every step copies a batch from (pageable) host memory to
the GPU, runs forward, softmax cross-entropy, backward and an SGD-momentum update; the
first --warmup steps are not timed; the time is taken after torch.cuda.synchronize().
cuDNN autotuning is on (kolo times its algorithms once per shape too) and PyTorch's default
TF32 setting for convolutions is kept (kolo leaves cuDNN's default math, which allows it).
Prints one JSON object: {"framework": "pytorch", "model", "batch", "images_per_sec", ...}.
No torchvision needed: the models are written out here.
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from train_vs_pytorch import lenet  # kolo's LeNet-5, shared with the CPU comparison


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck (stride on the 3x3), as kolo's resnet50 and torchvision."""

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


def resnet50(classes):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for stage, blocks in enumerate([3, 4, 6, 3]):
        width = 64 << stage
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, 2 if b == 0 and stage > 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


SHAPES = {"lenet": ((1, 28, 28), 10, lenet), "resnet50": ((3, 224, 224), 1000, resnet50)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=sorted(SHAPES), default="lenet")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"framework": "pytorch", "model": a.model, "error": "no CUDA device"}))
        return
    torch.backends.cudnn.benchmark = True
    shape, classes, build = SHAPES[a.model]
    dev = torch.device("cuda", 0)
    torch.manual_seed(42)
    model = build(classes).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    # A few distinct host batches, cycled (kolo draws each step's batch from its data set).
    xs = [torch.randn(a.batch, *shape) for _ in range(4)]
    ys = [torch.randint(0, classes, (a.batch,)) for _ in range(4)]
    times = []
    for step in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        x = xs[step % 4].to(dev)
        y = ys[step % 4].to(dev)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        loss_value = loss.item()  # kolo's step also returns its loss to the host
        torch.cuda.synchronize()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    total = sum(times)
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "model": a.model, "batch": a.batch,
                      "steps": a.steps, "images_per_sec": a.batch * a.steps / total,
                      "step_ms_median": 1000 * sorted(times)[len(times) // 2], "last_loss": loss_value,
                      "device": torch.cuda.get_device_name(0)}))


if __name__ == "__main__":
    main()

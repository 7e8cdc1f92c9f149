#!/usr/bin/python3
"""Allreduce vs parameter servers: medians, scaling efficiency, the cost model, the figure.

usage: bench/kvstore_plot.py [results dir]   (default docs/results/kvstore; reads comm.csv
and train.csv from bench/kvstore_scaling.sh, writes summary.csv, model.csv and
kvstore_scaling.png there and prints the tables docs/benchmarks.md shows)

Cost model (bytes through the busiest link of one step, model of M bytes, n workers, s servers):
  allreduce (ring):            2M(n-1)/n each way, on every rank's link
  parameter servers:           max(M, nM/s) each way: a worker pushes M and pulls M;
                               a server receives nM/s and sends nM/s
  servers beside workers 1:1:  2M(n-1)/n each way (a host's worker and server traffic)
A step's communication takes c + bytes/B. On this one host the 'link' is the busiest
process's share of memory bandwidth (both directions count); c and B are fitted to the
ResNet-50 measurements by least squares, and the fit is printed beside each measurement.
"""
import csv
import os
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DESIGNS = ["allreduce", "ps1", "ps1:1"]
COLORS = {"allreduce": "#1f77b4", "ps1": "#d62728", "ps1:1": "#2ca02c"}
M50 = 25557032 * 4  # ResNet-50 gradient set, bytes


def busiest_bytes(design, n, m):
    """Both directions of the busiest link (one host: the busiest process moves these)."""
    if design == "allreduce":
        return 2 * 2 * m * (n - 1) / n
    s = 1 if design == "ps1" else n
    return 2 * max(m, n * m / s)


def total_bytes(design, n, m):
    """Bytes every rank of one host touches in a step (copies, transfers, sums, the update's
    read of w, g, state and write of w, state ~ 4M): on a host whose ranks share 2 cores and
    one memory, the step takes about this divided by the host's copy rate.
      allreduce: each of n workers copies its gradient (M), sends and receives 2M(n-1)/n each
                 way, updates (4M) and copies the weights out (M)
      servers:   each worker sends M and receives M; the servers receive nM, add (n-1)M into
                 the sums (2 passes), update (4M) and send nM"""
    if design == "allreduce":
        return n * (m + 4 * m * (n - 1) / n + 4 * m + m)
    return 2 * n * m + n * m + 2 * (n - 1) * m + 4 * m + n * m


def fit(points):
    """Least squares t = c + x / B over (x, t) points; returns (c, B)."""
    xs, ts = [p[0] for p in points], [p[1] for p in points]
    mx, mt = statistics.mean(xs), statistics.mean(ts)
    sxx = sum((x - mx) ** 2 for x in xs)
    k = sum((x - mx) * (t - mt) for x, t in zip(xs, ts)) / sxx
    return mt - k * mx, 1.0 / k


def check_model(summary, bytes_of, key, title, column):
    """Fits t = c + bytes/B to the ResNet-50 medians, prints model beside measurement, and
    stores each row's model time under `key`."""
    pts = [(bytes_of(r["design"], r["workers"], M50), r["resnet50_comm_ms"] / 1e3) for r in summary]
    c, bw = fit(pts)
    print(f"\n{title} fitted to ResNet-50: c = {c * 1e3:.1f} ms, B = {bw / 1e9:.2f} GB/s")
    print(f"| design | workers | {column} | measured ms | model ms | error |")
    print("|---|---|---|---|---|---|")
    for r, (x, t) in zip(summary, pts):
        m = c + x / bw
        r[key] = m * 1e3
        print(f"| {r['design']} | {r['workers']} | {x / 1e6:.0f} | {t * 1e3:.1f} | {m * 1e3:.1f} | {(m - t) / t:+.0%} |")


def predict_network(n_list, m, bw, t_compute):
    """Efficiency on a network of bandwidth bw (bytes/s each way) with compute t_compute per step."""
    rows = []
    for n in n_list:
        t = {"allreduce": 2 * m * (n - 1) / n / bw, "ps1": n * m / bw, "ps1:1": 2 * m * (n - 1) / n / bw}
        for d, tc in t.items():
            rows.append({"workers": n, "design": d, "comm_s": tc, "eff_no_overlap": t_compute / (t_compute + tc),
                         "eff_full_overlap": t_compute / max(t_compute, tc)})
    return rows


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "docs/results/kvstore"
    comm = defaultdict(list)
    loads = []
    with open(os.path.join(out, "comm.csv")) as f:
        for r in csv.DictReader(f):
            comm[(r["label"], r["workload"], int(r["workers"]))].append(float(r["median_s"]))
            loads.append(float(r["loadavg"]))
    train = defaultdict(list)
    with open(os.path.join(out, "train.csv")) as f:
        for r in csv.DictReader(f):
            train[(r["label"], int(r["workers"]))].append(float(r["images_per_sec"]))
            loads.append(float(r["loadavg"]))
    ns = sorted({k[2] for k in comm})
    base = statistics.median(train[("local", 1)])  # one rank, no communication
    print(f"baseline: one rank through KVStore local, {base:.1f} images/s (median of {len(train[('local', 1)])})")
    summary = []
    print(f"load average during the runs: {min(loads):.1f} .. {max(loads):.1f} (2 cores)")
    print("| design | workers | servers | ranks | ResNet-20 images/s | efficiency | ResNet-20 comm ms/step | "
          "ResNet-50 comm ms/step |")
    print("|---|---|---|---|---|---|---|---|")
    for n in ns:
        for d in DESIGNS:
            if (d, n) not in train:
                continue
            s = 0 if d == "allreduce" else (1 if d == "ps1" else n)
            ips = statistics.median(train[(d, n)])
            eff = ips / (n * base)  # ideal: n times one rank without communication
            c20 = statistics.median(comm[(d, "resnet20", n)]) * 1e3
            c50 = statistics.median(comm[(d, "resnet50", n)]) * 1e3
            summary.append({"design": d, "workers": n, "servers": s, "ranks": n + s, "images_per_sec": ips,
                            "efficiency": eff, "resnet20_comm_ms": c20, "resnet50_comm_ms": c50,
                            "reps": len(train[(d, n)])})
            print(f"| {d} | {n} | {s} | {n + s} | {ips:.1f} | {eff:.0%} | {c20:.2f} | {c50:.1f} |")
    with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summary[0].keys()))
        w.writeheader()
        w.writerows(summary)

    check_model(summary, busiest_bytes, "model_ms", "busiest-link model",
                "busiest-link MB")
    check_model(summary, total_bytes, "host_model_ms", "one-host model (all bytes touched / copy rate)",
                "bytes touched MB")

    net_bw, t_c = 25e9 / 8, 0.10
    pred = predict_network([8, 16, 32, 64], M50, net_bw, t_c)
    with open(os.path.join(out, "model.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(pred[0].keys()))
        w.writeheader()
        w.writerows(pred)
    print(f"\nprediction, ResNet-50 fp32 (M = {M50 / 1e6:.1f} MB), 25 Gbit/s links, {t_c * 1e3:.0f} ms compute per step:")
    print("| workers | design | comm s/step | efficiency (no overlap) | (full overlap) |")
    print("|---|---|---|---|---|")
    for p in pred:
        print(f"| {p['workers']} | {p['design']} | {p['comm_s']:.3f} | {p['eff_no_overlap']:.0%} | "
              f"{p['eff_full_overlap']:.0%} |")
    mx = predict_network([8], M50, net_bw, t_c)[1]
    print(f"\n64 GPUs as 8 hosts x 8 GPUs (one worker per host, gradients summed in the host), one server: "
          f"{mx['eff_no_overlap']:.0%} (no overlap) .. {mx['eff_full_overlap']:.0%} (full overlap); MXNet published 38%")

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    width = 0.27
    ax = axes[0]
    ax2 = ax.twinx()
    for i, d in enumerate(DESIGNS):
        rows = [r for r in summary if r["design"] == d]
        xs = [ns.index(r["workers"]) + (i - 1) * width for r in rows]
        ax.bar(xs, [r["images_per_sec"] for r in rows], width, color=COLORS[d], label=f"{d} images/s")
        ax2.plot([ns.index(r["workers"]) for r in rows], [r["efficiency"] * 100 for r in rows], "o-",
                 color=COLORS[d], label=f"{d} efficiency")
    ax.set_xticks(range(len(ns)), [str(n) for n in ns])
    ax.set_xlabel("workers (servers: ps1 = 1, ps1:1 = workers; all ranks on 2 cores)")
    ax.set_ylabel("ResNet-20 training images/s (bars)")
    ax2.set_ylabel("scaling efficiency % (lines)")
    ax2.set_ylim(0, max(110, max(r["efficiency"] * 100 for r in summary) * 1.1))
    ax.set_title("ResNet-20 training, this machine (oversubscribed)")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper left")

    ax = axes[1]
    for i, d in enumerate(DESIGNS):
        rows = [r for r in summary if r["design"] == d]
        xs = [ns.index(r["workers"]) + (i - 1) * width for r in rows]
        ax.bar(xs, [r["resnet50_comm_ms"] for r in rows], width, color=COLORS[d], label=f"{d} measured")
        ax.plot(xs, [r["model_ms"] for r in rows], "k_", markersize=14, mew=2)
        ax.plot(xs, [r["host_model_ms"] for r in rows], "m_", markersize=14, mew=2)
    ax.plot([], [], "k_", markersize=14, mew=2, label="busiest-link model (fitted)")
    ax.plot([], [], "m_", markersize=14, mew=2, label="one-host total-bytes model (fitted)")
    ax.set_xticks(range(len(ns)), [str(n) for n in ns])
    ax.set_xlabel("workers")
    ax.set_ylabel("ms per step (push + pull, no compute)")
    ax.set_title("ResNet-50 gradient set (102 MB), communication only")
    ax.legend(fontsize=7)

    ax = axes[2]
    for d in DESIGNS:
        rows = [p for p in pred if p["design"] == d]
        wide = 6 if d == "allreduce" else 1.5  # ps1:1 beside workers has allreduce's bytes: drawn on top
        ax.plot([p["workers"] for p in rows], [p["eff_no_overlap"] * 100 for p in rows], "o-", color=COLORS[d],
                lw=wide, alpha=0.45 if d == "allreduce" else 1.0, label=f"{d} (no overlap)")
        ax.plot([p["workers"] for p in rows], [p["eff_full_overlap"] * 100 for p in rows], "o--", color=COLORS[d],
                alpha=0.5, label=f"{d} (full overlap)")
    ax.plot([8], [38], "k*", markersize=14, label="MXNet published: 38%, 64 GPUs, 1 server")
    ax.set_xscale("log", base=2)
    ax.set_xticks([8, 16, 32, 64], ["8", "16", "32", "64"])
    ax.set_xlabel("workers (hosts; the star: 8 hosts x 8 GPUs)")
    ax.set_ylabel("predicted scaling efficiency %")
    ax.set_ylim(0, 105)
    ax.set_title("Model: ResNet-50, 25 Gbit/s, 100 ms compute/step")
    ax.legend(fontsize=7)
    fig.tight_layout()
    png = os.path.join(out, "kvstore_scaling.png")
    fig.savefig(png, dpi=110)
    print(f"\nwrote {png}")


if __name__ == "__main__":
    main()

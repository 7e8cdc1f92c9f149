#!/usr/bin/python3
"""kolo-train through parameter servers equals kolo-train through allreduce.

usage: trainer_equivalence.py KOLO_TRAIN [mpirun flags...]

Runs LeNet on Fashion-MNIST for 2 x 10 steps: 2 ranks with --kv-store allreduce (kolo's
DistributedOptimizer, PyTorch's momentum rule), then 2 workers + 1 server and 2 workers +
2 servers (fc1's 48,000 weights split across both) with --kv-store dist_sync (MXNet's rule
on the servers). At a constant rate the two rules are the same update, so rank 0's mean
training loss must agree to 1e-4 (relative); and it must have fallen (the runs trained).
"""
import json
import os
import subprocess
import sys
import tempfile

ARGS = ["--batch-size", "16", "--epochs", "2",
        "--max-batches", "10", "--schedule", "constant", "--warmup-epochs", "0", "--no-eval",
        "--augment", "off", "--lr", "0.05"]


def run(binary, flags, np_, servers, kv, tmp):
    out = os.path.join(tmp, f"{kv}-{servers}.json")
    env = dict(os.environ, KOLO_NUM_SERVERS=str(servers), KOLO_KVSTORE_BIGARRAY_BOUND="10000")
    cmd = ["mpirun", "-np", str(np_), *flags, binary, *ARGS, "--kv-store", kv, "--metrics-json", out]
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    print(p.stdout)
    if p.returncode != 0:
        sys.exit(f"FAILED: exit code {p.returncode}")
    with open(out) as f:
        return [e["train_loss"] for e in json.load(f)["epochs"]]


def main():
    binary, flags = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        ref = run(binary, flags, 2, 0, "allreduce", tmp)
        failures = []
        for servers in (1, 2):
            got = run(binary, flags, 2 + servers, servers, "dist_sync", tmp)
            for epoch, (a, b) in enumerate(zip(ref, got)):
                print(f"epoch {epoch}: allreduce loss {a:.7f}, dist_sync with {servers} server(s) {b:.7f}")
                if abs(a - b) > 1e-4 * abs(a):
                    failures.append(f"{servers} server(s), epoch {epoch}: {b} vs {a}")
        if not ref[-1] < 0.95 * ref[0]:
            failures.append(f"the loss did not fall: {ref}")
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else "FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

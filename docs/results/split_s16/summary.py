#!/usr/bin/env python3
"""Medians per side from ab.sh output: kolo's median (ms) for resnet50 and tiny (the 'every
tensor named and async' line) and kolo's lone 4 B / 4 KB times (us), with MPI beside them."""
import re, statistics, sys
from collections import defaultdict
vals = defaultdict(list)
side = work = None
for line in open(sys.argv[1]):
    m = re.match(r"== (base|new) block \d+ (\w+)", line)
    if m:
        side, work = m.groups()
        continue
    if work in ("resnet50", "tiny"):
        m = re.search(r"kolo, every tensor named and async\s+min\s+([\d.]+) ms\s+median\s+([\d.]+) ms", line)
        if m: vals[(work, "kolo", side)].append(float(m.group(2)))
        m = re.search(r"kolo, same, gradients in allocate_shared\s+min\s+([\d.]+) ms\s+median\s+([\d.]+) ms", line)
        if m: vals[(work, "kolo shared", side)].append(float(m.group(2)))
        m = re.search(r"\(a\) MPI_Allreduce per tensor\s+min\s+([\d.]+) ms\s+median\s+([\d.]+) ms", line)
        if m: vals[(work, "MPI per tensor", side)].append(float(m.group(2)))
    elif work == "lone":
        f = line.split()
        if len(f) == 4 and f[0] in ("4", "4096"):
            vals[(f"lone {f[0]} B", "kolo us", side)].append(float(f[1]))
            vals[(f"lone {f[0]} B", "MPI us", side)].append(float(f[2]))
keys = sorted({(w, k) for (w, k, _) in vals})
for w, k in keys:
    b, n = vals[(w, k, "base")], vals[(w, k, "new")]
    if b and n:
        print(f"{w:10s} {k:15s} base median {statistics.median(b):8.3f} (runs {' '.join(f'{x:g}' for x in b)})"
              f"   new median {statistics.median(n):8.3f} (runs {' '.join(f'{x:g}' for x in n)})"
              f"   new/base {statistics.median(n) / statistics.median(b):.3f}")

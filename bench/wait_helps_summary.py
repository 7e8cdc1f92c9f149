#!/usr/bin/python3
# bench/wait_helps.sh summary: medians over every run of kolo/mpi per size for each
# (np, KOLO_WAIT_HELPS), and the workload ratios. Usage: wait_helps_summary.py OUT/run-*.txt
import re, sys, statistics as st
sweeps = {}; work = {}; loads = []
for path in sys.argv[1:]:
    key = None
    for line in open(path):
        m = re.search(r"load average: ([\d.]+)", line)
        if m: loads.append(float(m.group(1)))
        m = re.match(r"== (?:rep \d+ )?(np\d) sweep.*KOLO_WAIT_HELPS=(\d)", line)
        if m: key = ("sweep", m.group(1), m.group(2)); continue
        m = re.match(r"== np2 workload (\w+) KOLO_WAIT_HELPS=(\d)", line)
        if m: key = ("work", m.group(1), m.group(2)); continue
        if key and key[0] == "sweep":
            f = line.split()
            if len(f) > 14 and f[0].isdigit():
                sweeps.setdefault((key[1], key[2], int(f[0])), []).append((float(f[3]), float(f[8]), float(f[13])))
        if key and key[0] == "work":
            m = re.search(r"(every tensor named and async|allocate_shared)\s+min\s+([\d.]+) ms\s+median\s+([\d.]+) ms\s+([\d.]+)x", line)
            if m: work.setdefault((key[1], m.group(1)[:5], key[2]), []).append((float(m.group(3)), float(m.group(4))))
            m = re.search(r"\((a|b)\) MPI_Allreduce.*median\s+([\d.]+) ms", line)
            if m: work.setdefault((key[1], "mpi-" + m.group(1), key[2]), []).append((float(m.group(2)), 0))
print(f"runs: {len(sys.argv)-1}; load average (1 min) during runs: {min(loads)}-{max(loads)}")
print("| np | size (B) | helps=1 kolo us | helps=1 MPI us | helps=1 kolo/mpi | helps=0 kolo us | helps=0 MPI us | helps=0 kolo/mpi | n |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for np_ in ("np2", "np4"):
    for size in sorted({k[2] for k in sweeps if k[0] == np_}):
        cells = []
        for h in ("1", "0"):
            v = sweeps.get((np_, h, size), [])
            cells += [f"{st.median([x[0] for x in v]):.1f}", f"{st.median([x[1] for x in v]):.1f}", f"{st.median([x[2] for x in v]):.2f}"] if v else ["-"] * 3
        print(f"| {np_} | {size} | " + " | ".join(cells) + f" | {len(sweeps.get((np_, '1', size), []))} |")
print()
for k in sorted(work):
    v = work[k]
    print(k, "median of medians %.3f ms" % st.median([x[0] for x in v]),
          ("ratio median %.2f (runs: %s)" % (st.median([x[1] for x in v]), ", ".join("%.2f" % x[1] for x in v))) if v[0][1] else "")

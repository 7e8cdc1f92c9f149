#!/usr/bin/python3
"""Draws a kolo timeline (KOLO_TIMELINE's Chrome trace) as a PNG, one row per tensor.

The picture follows what Perfetto and chrome://tracing show for the same file: a track per
tensor, its phases as bars (nested phases drawn thinner, inside their parent), and the
`rank R ready` marks as ticks. It exists because neither viewer can be run headless here
(Perfetto's UI is a web site; chrome://tracing is gone from current Chromium), so docs/ and
CI can still show a trace as a picture.

Usage: timeline_plot.py TRACE OUT.png [--from MS] [--to MS] [--tracks N] [--title TEXT]
Times are milliseconds from the first event. Reads traces cut short by a killed job.
Needs python3-matplotlib (Debian).
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {
    "NEGOTIATE": "#f2c14e", "QUEUE": "#c7c7c7", "ERROR": "#d62728",
    "ALLREDUCE": "#4c78a8", "BROADCAST": "#54a24b", "ALLGATHER": "#b279a2",
    "MEMCPY_IN_FUSION_BUFFER": "#e45756", "MEMCPY_OUT_FUSION_BUFFER": "#ff9d98",
}


def load_events(path):
    text = open(path).read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        # A killed job leaves the array open; drop the last partial event and close it.
        return json.loads(text[:text.rstrip().rfind("},") + 1] + "]")


def spans_by_track(events):
    """Returns ({tid: name}, {tid: [(start, end, name, depth)]}, {tid: [(ts, name)]})."""
    names, spans, marks, stacks = {}, {}, {}, {}
    for e in events:
        tid = e.get("tid")
        if e.get("name") == "thread_name":
            names[tid] = e["args"]["name"]
        elif e["ph"] == "B":
            stacks.setdefault(tid, []).append((e["ts"], e.get("name", "?")))
        elif e["ph"] == "E" and stacks.get(tid):
            start, name = stacks[tid].pop()
            spans.setdefault(tid, []).append((start, e["ts"], name, len(stacks[tid])))
        elif e["ph"] == "i":
            marks.setdefault(tid, []).append((e["ts"], e["name"]))
    return names, spans, marks


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--from", dest="t0", type=float, default=None, help="window start (ms)")
    ap.add_argument("--to", dest="t1", type=float, default=None, help="window end (ms)")
    ap.add_argument("--tracks", type=int, default=40, help="at most this many tracks")
    ap.add_argument("--title", default=None)
    a = ap.parse_args()

    events = [e for e in load_events(a.trace) if "ts" in e or e.get("ph") == "M"]
    stamps = [e["ts"] for e in events if "ts" in e]
    if not stamps:
        sys.exit(f"timeline_plot: {a.trace} holds no timed events")
    origin = min(stamps)
    names, spans, marks = spans_by_track(events)
    lo = a.t0 if a.t0 is not None else 0.0
    hi = a.t1 if a.t1 is not None else (max(stamps) - origin) / 1000.0

    def visible(tid):
        return any((s - origin) / 1e3 < hi and (e - origin) / 1e3 > lo for s, e, _, _ in spans.get(tid, []))

    tids = [t for t in sorted(names) if visible(t)][: a.tracks]
    if not tids:
        sys.exit(f"timeline_plot: no spans between {lo} and {hi} ms")
    fig, ax = plt.subplots(figsize=(14, 0.32 * len(tids) + 1.6))
    used = set()
    for row, tid in enumerate(tids):
        y = len(tids) - 1 - row
        for s, e, name, depth in spans.get(tid, []):
            colour = COLOURS.get(name, "#72b7b2")  # transports (SHM_*, MPI_*, NCCL_*)
            height = 0.8 if depth == 0 else 0.45
            ax.broken_barh([((s - origin) / 1e3, max((e - s) / 1e3, 1e-3))], (y - height / 2, height),
                           facecolors=colour, edgecolor="none")
            used.add(name if name in COLOURS else "transport (SHM_/MPI_/NCCL_...)")
        for ts, _ in marks.get(tid, []):
            ax.plot([(ts - origin) / 1e3] * 2, [y - 0.45, y + 0.45], color="black", lw=0.6)
    ax.set_yticks(range(len(tids)))
    ax.set_yticklabels([names[t] for t in reversed(tids)], fontsize=7)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("ms since the first event (ticks: 'rank R ready' marks)")
    ax.set_title(a.title or a.trace, fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLOURS.get(n, "#72b7b2")) for n in sorted(used)]
    ax.legend(handles, sorted(used), fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"timeline_plot: {len(tids)} tracks, {lo:.1f}-{hi:.1f} ms -> {a.out}")


if __name__ == "__main__":
    main()

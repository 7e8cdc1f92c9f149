#!/usr/bin/env bash
# Runs a kolo program under mpirun with KOLO_TIMELINE set and checks the trace: valid JSON
# (also when cut short: the closing bracket is optional), one track per tensor named after
# it, and the expected phases; then kolo-timeline summarises it.
# Usage: timeline_test.sh <kolo-timeline> <mpirun flags...> -- <program...>
# EXPECT_TENSORS / EXPECT_PHASES (comma-separated) name what the trace must hold.
set -euo pipefail
tool=$1; shift
flags=(); while [ "$1" != "--" ]; do flags+=("$1"); shift; done; shift
trace=$(mktemp --suffix=.json); trap 'rm -f "$trace"' EXIT
KOLO_TIMELINE=$trace mpirun -np 2 "${flags[@]}" "$@" >/dev/null
EXPECT_TENSORS=${EXPECT_TENSORS:-grad,config,rows} EXPECT_PHASES=${EXPECT_PHASES:-NEGOTIATE,QUEUE,ALLREDUCE,BROADCAST,ALLGATHER} \
/usr/bin/python3 - "$trace" <<'PY'
import json, os, sys
text = open(sys.argv[1]).read()
events = json.loads(text)
# A killed job leaves no closing bracket; the text minus its last ",\n" must still parse.
cut = text[:text.rstrip().rfind("},") + 1] + "]"
json.loads(cut)
names = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
tracks = {e["tid"] for e in events if e.get("name") == "thread_name"}
phases = {e.get("name") for e in events if e["ph"] == "B"}
assert set(os.environ["EXPECT_TENSORS"].split(",")) <= names, names
assert len(tracks) == len(names), "one track per tensor"
for p in os.environ["EXPECT_PHASES"].split(","):
    assert p in phases, (p, phases)
# The executor names its transport inside the collective (shared memory by default).
assert phases & {"SHM_ALLREDUCE", "MPI_ALLREDUCE", "HIERARCHICAL_ALLREDUCE"}, phases
marks = [e["name"] for e in events if e["ph"] == "i"]
assert "rank 0 ready" in marks and "rank 1 ready" in marks, marks
begins = sum(1 for e in events if e["ph"] == "B"); ends = sum(1 for e in events if e["ph"] == "E")
assert begins == ends, (begins, ends)
print("timeline ok:", len(events), "events,", len(names), "tensor tracks")
PY
"$tool" "$trace" | tee /dev/stderr | grep -q "straggler (last rank to submit)"
"$tool" "$trace" | grep -Eq "^NEGOTIATE +[0-9]+"
# The same trace drawn as a picture (tools/timeline_plot.py): a PNG with one row per tensor.
png=$(mktemp --suffix=.png); trap 'rm -f "$trace" "$png"' EXIT
"$(dirname "$0")/../tools/timeline_plot.py" "$trace" "$png" >/dev/null
[ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || { echo "timeline_plot: not a PNG"; exit 1; }
[ "$(stat -c %s "$png")" -gt 10000 ] || { echo "timeline_plot: PNG too small"; exit 1; }
echo "kolo-timeline ok"

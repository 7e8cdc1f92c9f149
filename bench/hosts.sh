#!/usr/bin/env bash
# kolo across simulated hosts (tools/hosts/kolo-hosts) with a rate-limited link: what the
# hierarchical allreduce buys when the link is the bottleneck. Root only.
#
#   bench/hosts.sh [BUILD_DIR]          RATE=500mbit HOSTS=2 PER_HOST=2 ITERS=3 bench/hosts.sh build
#   MODES="auto leader mpi": auto = KOLO_CPU_OPERATIONS=auto (hierarchical, sliced across
#   hosts), leader = the same with KOLO_CROSS_HOST_ALLREDUCE=leader (the leaders carry it all),
#   mpi = KOLO_CPU_OPERATIONS=mpi (hierarchy off); SWEEP=1 (0: the step only); SETUP=1 (0: skip
#   the set-up/tear-down timing); DTYPE=float16|bfloat16 (the ResNet-50 step's gradients in 16 bits:
#   kolo moves them as such, the MPI baselines stay float32; the link bound counts 2 bytes a value;
#   this script asks for KOLO_CROSS_HOST_HALF_WIRE=16bit unless it is set (kolo's default is
#   float32 since session 16: one rounding; KOLO_CROSS_HOST_HALF_WIRE=float32 measures that));
#   ONE_CPU_GROUP=1 (default; 0: each host's processes keep their own scheduling group, as in the
#   runs before session 15 -- then one host's polling ranks can starve another's for seconds,
#   docs/hosts.md "Heartbeat timeout on simulated hosts");
#   MPIRUN_ARGS="--mca NAME VALUE ..." (extra mpirun arguments,
#   e.g. Open MPI TCP tuning, or its ring allreduce for the MPI baselines:
#   "--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4")
#
# 1. Set-up and tear-down time of the simulated hosts (CI's cost), 5 cycles each of 2 and 3 hosts.
# 2. HOSTS x PER_HOST ranks, every host's link shaped to RATE (tc; both directions):
#    a. the ResNet-50 gradient step (kolo-bench-allreduce --workload resnet50: 161 tensors,
#       102 MB): kolo (hierarchical: shm within the host, MPI between leaders) beside flat
#       MPI_Allreduce over all ranks (per tensor, and of all bytes in one buffer), same run;
#    b. the same with the hierarchy off (KOLO_CPU_OPERATIONS=mpi: kolo's flat MPI executor);
#    c. a size sweep, kolo beside MPI_Allreduce, with the hierarchy on and off.
#    The link bound: the bytes each host must send over its link / RATE; beside it the
#    measured one (bench/link_probe.py: one TCP connection, both directions at once). A hierarchical
#    allreduce over 2 hosts sends the tensor once per host (reduce-scatter + allgather between
#    2 leaders); a flat ring over HOSTS x PER_HOST ranks sends 2(P-1)/P x PER_HOST/... more.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
tools=$here/../tools/hosts
bench=$build/bench/kolo-bench-allreduce
[ -x "$bench" ] || { echo "hosts.sh: $bench not built" >&2; exit 1; }
rate=${RATE:-500mbit} hosts=${HOSTS:-2} per_host=${PER_HOST:-2} iters=${ITERS:-3}
modes=${MODES:-auto leader mpi} sweep=${SWEEP:-1} setup=${SETUP:-1} dtype=${DTYPE:-float32}
group=()
case ${ONE_CPU_GROUP:-1} in
  1) group=(--one-cpu-group) ;;
  0) ;;
  *) echo "hosts.sh: ONE_CPU_GROUP must be 0 or 1, not '${ONE_CPU_GROUP}'" >&2; exit 2 ;;
esac
read -r -a extra <<<"${MPIRUN_ARGS:-}"
why=$("$tools/kolo-hosts" check) || { echo "hosts.sh: cannot make simulated hosts: $why" >&2; exit 1; }
"$tools/kolo-hosts" cleanup
echo "hosts.sh: load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, one CPU group: ${ONE_CPU_GROUP:-1}"

# 1. Set-up / tear-down.
for n in 2 3; do
  [ "$setup" = 1 ] || break
  ups=() downs=()
  for c in 1 2 3 4 5; do
    t0=$(date +%s.%N)
    "$tools/kolo-hosts" up -s "bs$c" -n "$n" --rate "$rate"
    t1=$(date +%s.%N)
    "$tools/kolo-hosts" down -s "bs$c"
    t2=$(date +%s.%N)
    ups+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')")
    downs+=("$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.2f", b - a }')")
  done
  echo "set-up of $n hosts: ${ups[*]} s; tear-down: ${downs[*]} s"
done

# 2. The runs.
s=bh$$
s=${s:0:8}
"$tools/kolo-hosts" up -s "$s" -n "$hosts" --rate "$rate" ${group[@]+"${group[@]}"}
trap '"$tools/kolo-hosts" down -s "$s"' EXIT
list=""
for i in $(seq 1 "$hosts"); do list+="${list:+,}$s-h$i:$per_host"; done
root=()
[ "$(id -u)" -ne 0 ] || root=(--allow-run-as-root)
launch() {  # MODE args...
  local ops=$1 cross=sliced
  shift
  [ "$ops" != leader ] || { ops=auto cross=leader; }
  # Heartbeats share MPI's TCP connections: behind a bulk transfer on a slow link they wait
  # (queued bytes / rate), so the peer timeout must exceed the longest transfer (docs/runtime.md).
  "$tools/kolo-hosts" exec -s "$s" "$s-h1" env KOLO_CPU_OPERATIONS="$ops" KOLO_CROSS_HOST_ALLREDUCE="$cross" \
    KOLO_PEER_TIMEOUT_SECONDS="${KOLO_PEER_TIMEOUT_SECONDS:-120}" KOLO_CROSS_HOST_HALF_WIRE="${KOLO_CROSS_HOST_HALF_WIRE:-16bit}" mpirun "${root[@]}" --oversubscribe \
    -np $((hosts * per_host)) -H "$list" --mca plm_rsh_agent "$tools/kolo-hosts-agent" --mca plm_rsh_no_tree_spawn 1 \
    -x KOLO_CPU_OPERATIONS -x KOLO_CROSS_HOST_ALLREDUCE -x KOLO_PEER_TIMEOUT_SECONDS -x KOLO_CROSS_HOST_HALF_WIRE "${extra[@]}" "$bench" "$@"
}
bits=$(awk -v r="${rate,,}" 'BEGIN { m = 1; if (r ~ /gbit$/) m = 1e9; else if (r ~ /mbit$/) m = 1e6;
  else if (r ~ /kbit$/) m = 1e3; sub(/[a-z]+$/, "", r); print r * m }')
case $dtype in float32) vbytes=4 ;; float16 | bfloat16) vbytes=2 ;; *) echo "hosts.sh: DTYPE=$dtype: float32, float16 or bfloat16" >&2; exit 1 ;; esac
bytes=$((25557032 * vbytes))
# An allreduce over P hosts sends at least 2(P-1)/P of the buffer out of each host (once for 2).
bound_ms=$(awk -v b="$bytes" -v r="$bits" -v p="$hosts" 'BEGIN { printf "%.0f", b * 8 / r * 1000 * 2 * (p - 1) / p }')
echo "link: $rate per host each way ($(tc -n "kolo-$s-h1" qdisc show dev eth0 | head -1 | cut -d' ' -f2));" \
     "ResNet-50 gradients ($dtype) $bytes bytes; link bound (each host sends 2(P-1)/P of them, P=$hosts): $bound_ms ms"
# What one TCP connection moves through the shaped link, both ways at once (the measured bound).
"$tools/kolo-hosts" exec -s "$s" "$s-h2" /usr/bin/python3 "$here/link_probe.py" serve 9555 "$bytes" &
probe=$!
"$tools/kolo-hosts" exec -s "$s" "$s-h1" /usr/bin/python3 "$here/link_probe.py" send "$s-h2" 9555 "$bytes" ||
  echo "link probe failed"
wait "$probe" || true
for ops in $modes; do
  case $ops in
    auto) what="hierarchical, sliced across hosts" ;;
    leader) what="hierarchical, the leaders carry it between hosts (KOLO_CROSS_HOST_ALLREDUCE=leader)" ;;
    *) what="hierarchy off: flat MPI executor" ;;
  esac
  echo "== ResNet-50 gradient step, $hosts hosts x $per_host ranks, mode $ops ($what)"
  launch "$ops" --workload resnet50 --dtype "$dtype" --warmup 1 --iters "$iters" 2>&1 | grep -E "^#|^  " |
    awk -v b="$bound_ms" '{ print } /kolo, every tensor named and async/ {
      for (i = 1; i <= NF; ++i) if ($i == "median") m = $(i + 1); printf "  -> kolo median / link bound: %.2fx\n", m / b }'
done
for ops in $modes; do
  [ "$sweep" = 1 ] || break
  echo "== size sweep, $hosts hosts x $per_host ranks, mode $ops (kolo beside MPI_Allreduce)"
  launch "$ops" --min-bytes 64K --max-bytes 16M --factor 4 --warmup 2 --iters 5 2>&1 | grep -vE "^\s*$"
done

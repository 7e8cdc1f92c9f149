#!/usr/bin/env bash
# The KVStore communication-cost model (docs/benchmarks.md, "KVStore") against a real link:
# simulated hosts (tools/hosts/kolo-hosts, root only) whose links are shaped to RATE, one
# step's push + pull of a model's gradient set (kolo-bench-kvstore, no compute) for
#   allreduce  n workers, one per host
#   ps1        n workers, one per host, and 1 server on a host of its own
#   ps1:1      n hosts, each with one worker and one server (mpirun --map-by node)
# Every key is cut into one slice per server (KOLO_KVSTORE_BIGARRAY_BOUND=1024), as the model
# assumes. Beside each median step time: the model's time, busiest-link bytes / rate, with
# push then pull as kolo runs them (every push answered before the pull starts):
#   allreduce  2M(n-1)/n each way at once             -> 2M(n-1)/n / B
#   ps1        nM into the server, then nM out of it  -> 2nM / B
#   ps1:1      M(n-1)/n each way in the push, again in the pull -> 2M(n-1)/n / B
# and the ratio measured / model. B: the rate set, and the rate one TCP connection measured
# through the shaped link (bench/link_probe.py), both printed. DTYPES="float32 float16": the
# keys' dtypes to run (a float16/bfloat16 key travels to and from the servers in 2 bytes per
# element: M is halved for ps1 and ps1:1; the allreduce store reduces float32 copies).
#
#   bench/kvstore_link.sh [build dir]     RATE=50mbit WORKERS="2 3" WORKLOAD=resnet20 STEPS=5 DTYPES=float32
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
tools=$here/../tools/hosts
bench=$build/bench/kolo-bench-kvstore
[ -x "$bench" ] || { echo "kvstore_link.sh: $bench not built" >&2; exit 1; }
rate=${RATE:-50mbit} workload=${WORKLOAD:-resnet20} steps=${STEPS:-5}
read -r -a workers <<<"${WORKERS:-2 3}"
read -r -a dtypes <<<"${DTYPES:-float32}"
why=$("$tools/kolo-hosts" check) || { echo "kvstore_link.sh: cannot make simulated hosts: $why" >&2; exit 1; }
"$tools/kolo-hosts" cleanup
max=0
for n in "${workers[@]}"; do [ $((n + 1)) -gt $max ] && max=$((n + 1)); done
s=kl$$
s=${s:0:8}
"$tools/kolo-hosts" up -s "$s" -n "$max" --rate "$rate"
trap '"$tools/kolo-hosts" down -s "$s"' EXIT
echo "kvstore_link.sh: $(date -u +%H:%M) UTC, load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, $max hosts," \
     "links shaped to $rate each way"
bits=$(awk -v r="${rate,,}" 'BEGIN { m = 1; if (r ~ /gbit$/) m = 1e9; else if (r ~ /mbit$/) m = 1e6;
  else if (r ~ /kbit$/) m = 1e3; sub(/[a-z]+$/, "", r); print r * m }')
probe_bytes=$((bits / 8 * 2))  # two seconds at the set rate
"$tools/kolo-hosts" exec -s "$s" "$s-h2" /usr/bin/python3 "$here/link_probe.py" serve 9555 "$probe_bytes" &
probe=$!
"$tools/kolo-hosts" exec -s "$s" "$s-h1" /usr/bin/python3 "$here/link_probe.py" send "$s-h2" 9555 "$probe_bytes" ||
  echo "link probe failed"
wait "$probe" || true
root=()
[ "$(id -u)" -ne 0 ] || root=(--allow-run-as-root)
launch() {  # HOSTS PER_HOST SERVERS TYPE DTYPE
  local list="" i
  for i in $(seq 1 "$1"); do list+="${list:+,}$s-h$i:$2"; done
  "$tools/kolo-hosts" exec -s "$s" "$s-h1" env KOLO_NUM_SERVERS="$3" KOLO_KVSTORE_BIGARRAY_BOUND=1024 \
    KOLO_PEER_TIMEOUT_SECONDS=120 mpirun "${root[@]}" --oversubscribe --map-by node -np $(($1 * $2)) -H "$list" \
    --mca plm_rsh_agent "$tools/kolo-hosts-agent" --mca plm_rsh_no_tree_spawn 1 \
    -x KOLO_NUM_SERVERS -x KOLO_KVSTORE_BIGARRAY_BOUND -x KOLO_PEER_TIMEOUT_SECONDS \
    "$bench" --type "$4" --workload "$workload" --steps "$steps" --warmup 1 --dtype "$5" | grep "^kvstore"
}
model() {  # DESIGN N DTYPE LINE: prints LINE with the model's time and the ratio
  awk -v d="$1" -v n="$2" -v dt="$3" -v half="$([ "$3" = float32 ] && echo 1 || echo 2)" -v bits="$bits" '{
    for (i = 1; i <= NF; ++i) { if ($i == "step") ms = $(i + 1); if ($i == "MB") mb = $(i - 1) }
    if (d == "allreduce") half = 1  # the allreduce store sums float32 copies of 16-bit values
    M = mb * 1e6 * 8 / half
    if (d == "ps1") bytes = 2 * n * M; else bytes = 2 * M * (n - 1) / n
    t = bytes / bits * 1000
    printf "%-7s n=%d %s: measured %.1f ms, model %.1f ms (busiest link %.2f MB each way), measured/model %.2f\n",
           d, n, dt, ms, t, (d == "ps1" ? n * M : 2 * M * (n - 1) / n) / 8e6, ms / t }'
}
for dt in "${dtypes[@]}"; do
  for n in "${workers[@]}"; do
    for design in allreduce ps1 ps1:1; do
      case $design in
        allreduce) line=$(launch "$n" 1 0 allreduce "$dt") ;;
        ps1) line=$(launch $((n + 1)) 1 1 dist_sync "$dt") ;;
        ps1:1) line=$(launch "$n" 2 "$n" dist_sync "$dt") ;;
      esac
      echo "  $line"
      model "$design" "$n" "$dt" <<<"$line"
    done
  done
done
echo "kvstore_link.sh: done $(date -u +%H:%M) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"

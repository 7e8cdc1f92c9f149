#!/usr/bin/env bash
# Runs one command across simulated hosts (tools/hosts/kolo-hosts) and checks that nothing
# is left behind. Used by the `hosts` CTest label.
#
#   run.sh --hosts N --per-host R [--rate RATE] [--delay D] [--tcp-retries K] [--timeout S]
#          [--env K=V]... [--script] -- PROGRAM ARGS...
#
# Default: mpirun -np N*R -H s-h1:R,...  PROGRAM ARGS, started on host 1, with every --env
# and KOLO_* variable forwarded and KOLOTEST_HOSTS=NxR. --script: run PROGRAM ARGS on host 1
# instead (a test script that launches by itself), with KOLO_HOSTS_SESSION, KOLO_HOSTS_LIST
# (h1:R,h2:R,...) and KOLO_HOSTS_AGENT set.
# Afterwards (pass or fail) it checks that no process is left on any host and that every
# host's /dev/shm is empty, then removes the hosts (also on Ctrl-C or an error).
# Exit 77 (CTest's SKIP_RETURN_CODE) with the reason when namespaces cannot be made here.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tools=$(cd "$here/../../tools/hosts" && pwd)
hosts=2 per_host=1 rate="" delay="" retries="" timeout_s=240 script=0
envs=()
while [ $# -gt 0 ]; do
  case $1 in
    --hosts) hosts=$2; shift 2 ;;
    --per-host) per_host=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --tcp-retries) retries=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    --script) script=1; shift ;;
    --) shift; break ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -ge 1 ] || { echo "run.sh: no program given" >&2; exit 2; }

if ! why=$("$tools/kolo-hosts" check); then
  echo "SKIP: simulated hosts cannot be made here: $why"
  exit 77
fi
"$tools/kolo-hosts" cleanup  # sessions of earlier runs that crashed

session=t$$
t0=$(date +%s.%N)
# One cpu cgroup for all the hosts' processes: without it each orted's session is a scheduling
# group of its own, and one host's yield-polling ranks have kept both CPUs for seconds while
# another host's heartbeat threads waited (docs/hosts.md, "Heartbeat timeout on simulated hosts").
"$tools/kolo-hosts" up -s "$session" -n "$hosts" --one-cpu-group ${rate:+--rate "$rate"} ${delay:+--delay "$delay"} \
  ${retries:+--tcp-retries "$retries"} || exit 1
t1=$(date +%s.%N)
leftovers() {  # prints what is left on the hosts; status 1 if anything
  local bad=0
  for h in $("$tools/kolo-hosts" hosts -s "$session"); do
    local p s
    p=$("$tools/kolo-hosts" pids -s "$session" "$h" | tr '\n' ' ')
    p=${p% }
    # A halted host (fault tests) has no mount namespace left, and with it went its /dev/shm.
    if [ -n "$(readlink "/proc/$(cat "/run/kolo-hosts/$session/${h##*-}.pid")/ns/mnt" 2>/dev/null)" ]; then
      s=$("$tools/kolo-hosts" exec -s "$session" "$h" ls -A /dev/shm | tr '\n' ' ')
    else
      s=""
    fi
    if [ -n "$p" ]; then echo "LEFTOVER: processes on $h: $(ps -o pid=,comm= -p "${p// /,}" | tr '\n' ';')"; bad=1; fi
    if [ -n "$s" ]; then echo "LEFTOVER: /dev/shm on $h: $s"; bad=1; fi
  done
  return $bad
}
teardown() {
  "$tools/kolo-hosts" down -s "$session"
  awk -v a="$t0" -v b="$t1" -v c="$td" -v d="$(date +%s.%N)" \
    'BEGIN { printf "hosts: set-up %.2f s, tear-down %.2f s\n", b - a, d - c }'
}
trap 'td=$(date +%s.%N); teardown' EXIT
trap 'exit 130' INT TERM

list=""
for i in $(seq 1 "$hosts"); do list+="${list:+,}$session-h$i:$per_host"; done
export KOLOTEST_HOSTS=${hosts}x${per_host} KOLO_HOSTS_SESSION=$session KOLO_HOSTS_LIST=$list
export KOLO_HOSTS_AGENT=$tools/kolo-hosts-agent
for e in "${envs[@]}"; do export "${e?}"; done

if [ "$script" = 1 ]; then
  timeout -k 5 "$timeout_s" "$tools/kolo-hosts" exec -s "$session" "$session-h1" "$@"
  rc=$?
else
  xs=()
  for v in $(compgen -e); do [[ $v == KOLO_* || $v == KOLOTEST_* ]] && xs+=(-x "$v"); done
  root=()
  [ "$(id -u)" -ne 0 ] || root=(--allow-run-as-root)
  timeout -k 5 "$timeout_s" "$tools/kolo-hosts" exec -s "$session" "$session-h1" \
    mpirun "${root[@]}" --oversubscribe -np $((hosts * per_host)) -H "$list" \
    --mca plm_rsh_agent "$KOLO_HOSTS_AGENT" --mca plm_rsh_no_tree_spawn 1 "${xs[@]}" "$@"
  rc=$?
fi
[ "$rc" -ne 124 ] || echo "FAILED: timed out after $timeout_s s"
# mpirun has returned; its orteds may still be ending.
for _ in $(seq 1 50); do leftovers >/dev/null && break; sleep 0.1; done
leftovers || rc=1
echo "run.sh: exit $rc"
exit "$rc"

#!/usr/bin/env bash
# Faults between hosts (label hosts): run by run.sh --script on host 1 of a 2-host session
# (KOLO_HOSTS_SESSION, KOLO_HOSTS_AGENT set; run.sh then checks that nothing is left on any
# host and every /dev/shm is empty). Each case starts 2 hosts x 2 ranks of
# `kolo-test-scenario train-loop` (gradient-like allreduces, each rank printing progress) and
# does something to host 2 mid-run:
#   pause        rank 3 SIGSTOPped for 5 s, then SIGCONT: every rank carries on (LOOP-DONE)
#   kill-ranks   host 2's ranks SIGKILLed: the job ends within 30 s naming a lost rank and host 2
#   link-down    host 2's link taken down for good: kolo's heartbeats (KOLO_PEER_TIMEOUT_SECONDS=5)
#                find the other host silent, so every rank on host 1 ends within 30 s with an
#                error naming host 2, and host 2's ranks end too; then mpirun and host 2's
#                orted end by themselves once TCP gives up on the link (the hosts run with
#                net.ipv4.tcp_retries2=5, run.sh --tcp-retries: ~13 s instead of ~15 min)
#   halt         host 2 loses power (every process on it SIGKILLed, its orted too): the job
#                ends within 30 s naming host 2 (last: host 2 is gone afterwards)
#   faults_test.sh KOLO_TEST_SCENARIO
set -uo pipefail
scenario=$1
s=$KOLO_HOSTS_SESSION
h1=$s-h1 h2=$s-h2
tools=$(dirname "$KOLO_HOSTS_AGENT")
bound=30
failures=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
root=()
[ "$(id -u)" -ne 0 ] || root=(--allow-run-as-root)

launch() {  # SECONDS PEER-TIMEOUT: starts the job in the background; sets job_pid
  : >"$log"
  mpirun "${root[@]}" --oversubscribe -np 4 -H "$h1:2,$h2:2" --mca plm_rsh_agent "$KOLO_HOSTS_AGENT" \
    --mca plm_rsh_no_tree_spawn 1 -x KOLOTEST_LOOP_SECONDS="$1" -x KOLO_STALL_SHUTDOWN_TIME_SECONDS \
    -x KOLO_PEER_TIMEOUT_SECONDS="$2" "$scenario" train-loop >"$log" 2>&1 &
  job_pid=$!
  # Running once every rank has reported a step.
  for _ in $(seq 1 300); do
    [ "$(grep -c ': step ' "$log")" -ge 4 ] && [ "$(grep -o '^rank [0-9]' "$log" | sort -u | wc -l)" -eq 4 ] && return 0
    kill -0 "$job_pid" 2>/dev/null || break
    sleep 0.1
  done
  return 1
}
start_job() {  # SECONDS [PEER-TIMEOUT]: launch, with one more try
  launch "$1" "${2:-5}" && return 0
  # After the link-down case, Open MPI's launch across the link has been seen to stall once
  # (mpirun polling, no daemon on host 2, no output, the link working): a second try starts.
  echo "NOTE: the job did not start within 30 s (output: $(tr '\n' ' ' <"$log" | cut -c1-300)); trying again"
  kill -9 "$job_pid" 2>/dev/null; wait "$job_pid" 2>/dev/null
  launch "$1" "${2:-5}" && return 0
  echo "FAIL: the job did not start; output:"; sed 's/^/  | /' "$log" | tail -20
  return 1
}
wait_job() {  # SECONDS: waits at most that long; sets job_rc (124: still running) and waited
  local t0=$SECONDS
  job_rc=124
  while [ $((SECONDS - t0)) -lt "$1" ]; do
    if ! kill -0 "$job_pid" 2>/dev/null; then wait "$job_pid"; job_rc=$?; break; fi
    sleep 0.2
  done
  waited=$((SECONDS - t0))
}
rank_pids() {  # HOST [RANK]: pids of the job's ranks on HOST
  for p in $("$tools/kolo-hosts" pids -s "$s" "$1"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "kolo-test-scena" ] || continue
    # grep without -q reads all of tr's output (no SIGPIPE failing the pipeline)
    [ -z "${2:-}" ] || tr '\0' '\n' <"/proc/$p/environ" | grep -x "OMPI_COMM_WORLD_RANK=$2" >/dev/null || continue
    echo "$p"
  done
}
verdict() {  # NAME OK-FLAG
  if [ "$2" = 1 ]; then echo "PASS $1"; else
    echo "FAIL $1; output:"; grep -v ': step ' "$log" | sed 's/^/  | /' | tail -30
    failures=$((failures + 1))
  fi
}

# pause: SIGSTOP one rank for 5 s; everyone carries on (a peer timeout of 15 s: a remote
# rank stopped for longer than the timeout is rightly declared dead).
if start_job 12 15; then
  p=$(rank_pids "$h2" 3)
  [ -n "$p" ] || echo "FAIL pause: rank 3 not found on $h2"
  kill -STOP $p; sleep 5; kill -CONT $p
  wait_job 90
  ok=1
  [ "$job_rc" -eq 0 ] || ok=0
  [ "$(grep -c 'LOOP-DONE' "$log")" -eq 4 ] || ok=0
  echo "pause: rank 3 (pid $p) stopped 5 s; exit $job_rc, $(grep -c LOOP-DONE "$log") of 4 ranks done"
  verdict pause "$ok"
else failures=$((failures + 1)); fi

# kill-ranks: host 2's ranks SIGKILLed.
if start_job 60; then
  kill -9 $(rank_pids "$h2")
  wait_job 60
  ok=1
  [ "$job_rc" -ne 0 ] && [ "$job_rc" -ne 124 ] && [ "$waited" -le "$bound" ] || ok=0
  grep -Eq "rank [23] .*on node $h2 exited on signal 9" "$log" || ok=0
  echo "kill-ranks: job ended after $waited s (exit $job_rc): $(grep -Eo "rank [23] .*on node $h2 exited on signal 9" "$log" | head -1)"
  verdict kill-ranks "$ok"
else failures=$((failures + 1)); fi

# link-down: host 2's link goes down for good.
if start_job 120; then
  t0=$SECONDS
  "$tools/kolo-hosts" link -s "$s" "$h2" down
  # Every rank, on both hosts, must end by itself within the bound.
  ranks_end=-1
  while [ $((SECONDS - t0)) -le "$bound" ]; do
    [ -z "$(rank_pids "$h1")$(rank_pids "$h2")" ] && { ranks_end=$((SECONDS - t0)); break; }
    sleep 0.5
  done
  # Then mpirun, once TCP gives up on host 2's daemon (tcp_retries2=5).
  wait_job 60
  mpirun_end=$((SECONDS - t0))
  # And host 2's orted, once TCP gives up on mpirun.
  for _ in $(seq 1 60); do
    orted_left=$("$tools/kolo-hosts" pids -s "$s" "$h2" | tr '\n' ' ')
    [ -n "$orted_left" ] || break
    sleep 0.5
  done
  host2_end=$((SECONDS - t0))
  ok=1
  [ "$ranks_end" -ge 0 ] || ok=0
  for r in 0 1; do
    grep -Eq "^rank $r on $h1: LOOP-FAILED .*peer lost: rank [23] \(pid [0-9]+ on host $h2\) is dead" "$log" || {
      echo "link-down: rank $r on $h1 did not end with an error naming a rank on $h2"; ok=0; }
  done
  [ "$job_rc" -ne 124 ] || ok=0
  [ -z "$orted_left" ] || { echo "link-down: still running on $h2: $orted_left"; ok=0; }
  echo "link-down: every rank ended ${ranks_end} s after the link went down (bound $bound s), mpirun" \
       "after $mpirun_end s (exit $job_rc), host 2 empty after $host2_end s: $(grep -Eo -m1 "LOOP-FAILED .*is dead" "$log")"
  verdict link-down "$ok"
  if kill -0 "$job_pid" 2>/dev/null; then kill -9 "$job_pid"; wait "$job_pid" 2>/dev/null; fi
  "$tools/kolo-hosts" link -s "$s" "$h2" up
else failures=$((failures + 1)); fi

# halt: host 2 loses power.
if start_job 60; then
  "$tools/kolo-hosts" halt -s "$s" "$h2"
  wait_job 60
  ok=1
  [ "$job_rc" -ne 0 ] && [ "$job_rc" -ne 124 ] && [ "$waited" -le "$bound" ] || ok=0
  # Open MPI names the host: its daemon (ORTE) or its ranks (the TCP BTL) were lost.
  lost="(Remote daemon: .* on node $h2|Peer host: +$h2)"
  grep -Eq "$lost" "$log" || ok=0
  echo "halt: job ended after $waited s (exit $job_rc): $(grep -Eo -m1 "$lost" "$log")"
  verdict halt "$ok"
else failures=$((failures + 1)); fi

echo "faults test: $failures failure(s)"
[ "$failures" -eq 0 ]

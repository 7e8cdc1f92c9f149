#!/usr/bin/env bash
# kolo-run across simulated hosts (label hosts): run by run.sh --script on host 1 of a
# 3-host session (KOLO_HOSTS_SESSION, KOLO_HOSTS_AGENT set). Every flag, and every error that
# must stop the launch before any rank starts.
#   kolo_run_hosts_test.sh KOLO_RUN KOLO_MPI_TESTS
set -uo pipefail
kolo_run=$1 mpi_tests=$2
s=$KOLO_HOSTS_SESSION
h1=$s-h1 h2=$s-h2 h3=$s-h3
tools=$(dirname "$KOLO_HOSTS_AGENT")
export KOLO_RUN_RSH=$KOLO_HOSTS_AGENT
failures=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# expect NAME STATUS REGEX... -- command: runs it, checks the exit status and that each
# regex matches its output (stdout and stderr together).
expect() {
  local name=$1 want=$2
  shift 2
  local pats=()
  while [ "$1" != "--" ]; do pats+=("$1"); shift; done
  shift
  "$@" >"$out" 2>&1
  local rc=$? ok=1
  [ "$rc" -eq "$want" ] || ok=0
  for p in "${pats[@]}"; do grep -Eq -- "$p" "$out" || { ok=0; echo "  missing: $p"; }; done
  if [ "$ok" = 1 ]; then
    echo "PASS $name"
  else
    echo "FAIL $name (exit $rc, expected $want); output:"
    sed 's/^/  | /' "$out" | tail -40
    failures=$((failures + 1))
  fi
}
count() { grep -Ec -- "$1" "$out"; }

# --check: a table with every host reachable, same version, OK.
expect check 0 "^host +slots +via" "^$h1 +2 +local +$h1 .*OK$" "^$h2 +2 +kolo-hosts-agent +$h2 .*OK$" \
  -- "$kolo_run" --check -H "$h1:2,$h2:2"

# --launcher ssh + --verbose: 2 hosts x 2 ranks; every rank reports its host, local rank,
# the hierarchical allreduce (sliced: the hosts have equal ranks) and the interface; the
# [hosts] checks pass.
expect verbose-ssh 0 "kolo mpi suite: passed on 4 ranks" \
  "rank=0 size=4 host=$h1 local_rank=0 local_size=2 host_index=0 hosts=2 allreduce=shm\+mpi\(hierarchical\) .*cross_host=sliced" \
  "rank=3 size=4 host=$h2 local_rank=1 local_size=2 host_index=1 hosts=2 allreduce=shm\+mpi\(hierarchical\) .*cross_host=sliced" \
  "interface=eth0\(10\.77\.0\.2\),from=MPI-default" \
  -- "$kolo_run" --launcher ssh --verbose -H "$h1:2,$h2:2" --env KOLOTEST_HOSTS=2x2 "$mpi_tests" "[hosts]"
[ "$(count '^kolo verbose:')" -eq 4 ] || { echo "FAIL verbose-ssh: expected 4 verbose lines"; failures=$((failures + 1)); }

# --launcher mpi (Open MPI picks its launcher: here the agent through its own variable),
# --hostfile, 3 hosts x 1 rank, --network-interface: kolo and Open MPI use eth0.
hostfile=$(mktemp)
printf '%s slots=1\n%s:1\n%s\n' "$h1" "$h2" "$h3" >"$hostfile"
expect hostfile-mpi-interface 0 "kolo mpi suite: passed on 3 ranks" \
  "host=$h3 local_rank=0 local_size=1 host_index=2 hosts=3 .*interface=eth0\(10\.77\.0\.3\),from=KOLO_NETWORK_INTERFACE" \
  -- env OMPI_MCA_plm_rsh_agent="$KOLO_HOSTS_AGENT" "$kolo_run" --launcher mpi --hostfile "$hostfile" \
     --network-interface eth0 --verbose --env KOLOTEST_HOSTS=3x1 "$mpi_tests" "[hosts]"
rm -f "$hostfile"

# --sync-dst-dir: the working directory reaches every host's own /dev/shm (private per
# host), and the ranks start there.
src=$(mktemp -d)
echo "payload-$$" >"$src/data.txt"
expect sync-dst-dir 0 "^$h1 payload-$$$" "^$h2 payload-$$$" "^$h3 payload-$$$" \
  -- sh -c "cd '$src' && '$kolo_run' --launcher ssh --sync-dst-dir /dev/shm/kolo-sync -H $h1,$h2,$h3 \
            sh -c 'echo \$(hostname) \$(cat data.txt); rm -rf /dev/shm/kolo-sync'"
rm -rf "$src"

# Errors before any rank starts: each names the host; the program never runs (it would
# leave a marker in /tmp, which the hosts share).
marker=/tmp/kolo-run-started-$$
bad() {  # name regex kolo-run-args...
  local name=$1 re=$2
  shift 2
  expect "$name" 1 "$re" "kolo-run: no rank was started" -- "$kolo_run" "$@" touch "$marker"
  if [ -e "$marker" ]; then echo "FAIL $name: a rank started"; failures=$((failures + 1)); rm -f "$marker"; fi
}
bad unresolvable "host nosuchhost: name does not resolve" --launcher ssh -H "$h1:1,nosuchhost:1"
bad interface "host $h2: no interface eth9 \(it has: .*eth0" --launcher ssh -H "$h1:1,$h2:1" --network-interface eth9
bad small-shm "host $h2: /dev/shm has .* free, less than --min-shm 1 GiB" --launcher ssh -H "$h1:1,$h2:1" --min-shm 1G
# A host whose kolo differs: host 2 sees another kolo-run at the same path (bind mount in its
# own mount namespace), with another version and build options.
other=$(mktemp)
sed -e 's/^KOLO_VERSION = .*/KOLO_VERSION = "0.0.9"/' -e 's/^KOLO_BUILD = "cuda=[A-Z]*/KOLO_BUILD = "cuda=ELSEWHERE/' \
  "$kolo_run" >"$other"
chmod +x "$other"
"$tools/kolo-hosts" exec -s "$s" "$h2" mount --bind "$other" "$kolo_run"
bad version "host $h2: kolo 0.0.9 here, [0-9.]+ on the launching host; build options differ" --launcher ssh -H "$h1:1,$h2:1"
expect version-check-table 1 "^$h2 .*0\.0\.9 .*cuda=ELSEWHERE" -- "$kolo_run" --check -H "$h1:1,$h2:1"
"$tools/kolo-hosts" exec -s "$s" "$h2" umount "$kolo_run"
rm -f "$other"
# A host that lost power: its name resolves, nothing answers.
"$tools/kolo-hosts" halt -s "$s" "$h3"
bad unreachable "host $h3: unreachable over kolo-hosts-agent: .*host is down" --launcher ssh -H "$h1:1,$h3:1"

echo "kolo-run hosts test: $failures failure(s)"
[ "$failures" -eq 0 ]

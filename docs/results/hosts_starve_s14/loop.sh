#!/bin/bash
# loop.sh LAYOUT FIRST LAST VARIANT... : runs hosts.LAYOUT.suite with heartbeat traces, each
# variant in turn per round (ABAB); prints the longest heartbeat-thread tick gap per run.
cd "$(dirname "$0")/../../.."  # the repo root; .h4ab/<variant>/run starts that variant's kolo_mpi_tests
suite="[allreduce],[broadcast],[allgather],[alltoall],[reducescatter],[random],[errors],[shared-memory],[hosts],[cross-host]"
lay=$1; first=$2; last=$3; shift 3
h=${lay%x*}; r=${lay#*x}
for i in $(seq $first $last); do
  for v in "$@"; do
    b=${v%cg}; rs=test/hosts/run-old.sh; [ "$b" != "$v" ] && rs=test/hosts/run.sh
    d=${OUT:-/tmp/h4fl14}/$lay-$v-$i; rm -rf $d; mkdir -p $d; chmod 777 $d
    s=$(date +%s.%N); l0=$(cut -d' ' -f1 /proc/loadavg)
    KOLO_TEST_HB_TRACE=$d KOLO_STALL_SHUTDOWN_TIME_SECONDS=60 KOLO_PEER_TIMEOUT_SECONDS=${TMO:-60} \
      /work/notes/bin/busy nice -n 10 timeout 200 $rs --hosts $h --per-host $r --timeout 165 -- $PWD/.h4ab/$b/run "$suite" > $d/out.txt 2>&1
    rc=$?
    g=$(cat $d/hb-*.txt 2>/dev/null | awk '$4=="tick" && $5>m {m=$5} END{printf "%.0f", m}')
    n1=$(cat $d/hb-*.txt 2>/dev/null | awk '$4=="tick" && $5>1000' | wc -l)
    echo "$lay $v run $i rc=$rc $(awk -v s=$s -v e=$(date +%s.%N) 'BEGIN{printf "%.1f s", e-s}') load $l0 $(cut -d' ' -f1 /proc/loadavg) maxgap_ms $g ticks_over_1s $n1 $(grep -m1 'peer lost\|FAILED' $d/out.txt | cut -c1-100)"
  done
done

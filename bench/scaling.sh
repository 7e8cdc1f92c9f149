#!/usr/bin/env bash
# Scaling of synthetic-data training throughput with the number of ranks: kolo-bench-train at
# np = 1, 2, 4 (NPS) for each model (MODELS), THREADS Eigen threads per rank, REPEATS rounds.
# Rounds are interleaved (np=1, 2, 4, then again) so the load of other processes on a shared
# machine falls on every np alike; each (model, np) keeps the median of its rounds.
#
#   bench/scaling.sh [BUILD_DIR] [OUT_DIR]
#   MODELS="resnet20 lenet resnet50" NPS="1 2 4" REPEATS=3 THREADS=1 bench/scaling.sh build /tmp/scaling
#
# Writes OUT_DIR/scaling_runs.csv (every run, kolo-bench-train's rows), OUT_DIR/scaling.csv
# (median per model and np, with scaling efficiency = total_np / (np x total_1)) and
# OUT_DIR/scaling.png (gnuplot; Debian's gnuplot-nox is installed when missing): per model,
# bars = total images/s, line = scaling efficiency on the second axis.
# When np x THREADS exceeds the cores, the runs are oversubscribed: the script says so and
# the figure's title and labels carry it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
out="${2:-$build/bench-results}"
models="${MODELS:-resnet20 lenet}"
nps="${NPS:-1 2 4}"
repeats="${REPEATS:-3}"
threads="${THREADS:-1}"
bench="$build/bench/kolo-bench-train"
[ -x "$bench" ] || { echo "scaling: $bench not built (cmake --build $build --target kolo-bench-train)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "scaling: mpirun not found" >&2; exit 1; }
if ! command -v gnuplot >/dev/null; then
  echo "scaling: installing gnuplot-nox (Debian)" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null
fi
mkdir -p "$out"
runs="$out/scaling_runs.csv"
load="$out/scaling_load.txt"

mpi_flags=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && mpi_flags+=(--allow-run-as-root)
cores="$(nproc)"
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"

# Per model: batch per rank, warm-up and timed steps. ResNet-50 (224x224) is ~100x a
# ResNet-20 image on CPU: small batch, few steps.
params() {
  case "$1" in
    lenet) echo "64 5 50" ;;
    resnet20) echo "32 3 20" ;;
    resnet56) echo "32 2 10" ;;
    resnet50) echo "4 1 4" ;;
    *) echo "scaling: unknown model $1" >&2; exit 1 ;;
  esac
}

echo "scaling: $cpu, $cores cores; models: $models; np: $nps; $threads thread(s) per rank; $repeats round(s)"
for np in $nps; do
  if [ $((np * threads)) -gt "$cores" ]; then
    echo "scaling: NOTE np=$np x $threads thread(s) = $((np * threads)) > $cores cores: OVERSUBSCRIBED" \
         "(ranks share cores; throughput cannot scale past $cores cores)"
  fi
done
oversubscribed=""
for np in $nps; do [ $((np * threads)) -gt "$cores" ] && oversubscribed+=" np=$np"; done
# PLOT_ONLY=1: summarise and plot the runs already in OUT_DIR (e.g. after changing the plot).
if [ "${PLOT_ONLY:-0}" != 1 ]; then
rm -f "$runs"
echo "before $(cut -d' ' -f1-3 /proc/loadavg)" >"$load"
echo "scaling: load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$repeats"); do
  for model in $models; do
    read -r batch warmup steps <<<"$(params "$model")"
    for np in $nps; do
      line="$(mpirun -np "$np" "${mpi_flags[@]}" "$bench" --model "$model" --batch-size "$batch" \
                --warmup "$warmup" --steps "$steps" --threads "$threads" --csv "$runs" | grep '^images/s')"
      echo "scaling: round $round $model np=$np: $line"
    done
  done
done
echo "after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$load"
echo "scaling: load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
[ -s "$runs" ] || { echo "scaling: no runs in $runs" >&2; exit 1; }
loads="$(awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 }' "$load" 2>/dev/null || true)"

# Median per (model, np) of total images/s (its row's other columns come with it), then the
# efficiency against np=1 of the same model.
summary="$out/scaling.csv"
{
  echo "model,ranks,threads_per_rank,batch_per_rank,images_per_s_total,images_per_s_per_rank,step_ms_median,allreduce_wait_ms_mean,scaling_efficiency,oversubscribed,rounds"
  tail -n +2 "$runs" | sort -t, -k1,1 -k2,2n -k8,8g |
    awk -F, '
      { key = $1 "," $2; n[key]++; row[key, n[key]] = $0; if (!(key in seen)) { seen[key] = 1; order[++k] = key } }
      END {
        for (i = 1; i <= k; i++) {
          key = order[i]; split(row[key, int((n[key] + 1) / 2)], f, ",")
          if (f[2] == 1) base[f[1]] = f[8]
          eff = (f[1] in base) ? f[8] / (f[2] * base[f[1]]) : 0
          printf "%s,%s,%s,%s,%.2f,%.2f,%.3f,%.3f,%.4f,%s,%d\n", f[1], f[2], f[3], f[4], f[8], f[7], f[9], f[10], eff, f[11], n[key]
        }
      }'
} >"$summary"
echo "scaling: wrote $runs and $summary"
column -s, -t <"$summary"

# One panel per model (throughputs differ by 100x between models).
plot="$out/scaling.gp"
nmodels=$(echo $models | wc -w)
{
  echo "set terminal pngcairo size $((420 * nmodels + 80)),520 font 'DejaVu Sans,11'"
  echo "set output '$out/scaling.png'"
  title="kolo-bench-train, synthetic data: total images/s (bars), scaling efficiency vs np=1 (line); median of $repeats round(s)"
  title+="\\n$cpu, $cores cores, shared; $threads thread(s) per rank"
  [ -n "$oversubscribed" ] && title+=";$oversubscribed OVERSUBSCRIBED (more ranks x threads than cores, hatched)"
  [ -n "$loads" ] && title+="\\n1-min load average $loads"
  echo "set multiplot layout 1,$nmodels title \"$title\" font ',11'"
  echo "set style fill solid 0.75 border -1"
  echo "set boxwidth 0.6"
  # Throughput labels sit at the foot of their bar, in an opaque box (readable on hatching),
  # away from the efficiency labels beside the line.
  echo "set style textbox opaque noborder"
  echo "set xrange [-0.6:$(( $(echo $nps | wc -w) - 1 )).6]"
  echo "set yrange [0:*]"
  echo "set y2range [0:125]"
  echo "set ytics nomirror"
  echo "set y2tics 0,25,125"
  echo "set grid y2tics"
  echo "set ylabel 'total images/s'"
  echo "set y2label 'scaling efficiency (%)'"
  echo "set xlabel 'ranks (np)'"
  echo "set key below maxrows 2 width -2"
  echo "set offsets 0,0,graph 0.1,0"
  for model in $models; do
    read -r batch _ _ <<<"$(params "$model")"
    # Per model: x position, np, total images/s, efficiency (%), oversubscribed.
    data="$out/scaling_$model.dat"
    awk -F, -v m="$model" '$1 == m { printf "%d %s %s %.1f %s\n", i++, $2, $5, 100 * $9, $10 }' "$summary" >"$data"
    echo "set title '$model, batch $batch per rank'"
    echo "plot '$data' using 1:(\$5 == 0 ? \$3 : NaN):xtic(2) with boxes lc rgb '#4a7ebb' title 'images/s', \\"
    echo "     '' using 1:(\$5 == 1 ? \$3 : NaN):xtic(2) with boxes fs pattern 4 lc rgb '#4a7ebb' title 'images/s, oversubscribed', \\"
    echo "     '' using 1:(0):(sprintf(\$3 < 10 ? '%.2f' : '%.0f', \$3)) with labels boxed offset 0,1.2 notitle, \\"
    echo "     '' using 1:4 axes x1y2 with linespoints lw 2 pt 7 lc rgb '#d0312d' title 'efficiency', \\"
    echo "     '' using 1:4:(sprintf('%.0f%%', \$4)) axes x1y2 with labels left offset 0.7,0.7 tc rgb '#d0312d' notitle"
  done
  echo "unset multiplot"
} >"$plot"
gnuplot "$plot"
echo "scaling: wrote $out/scaling.png"

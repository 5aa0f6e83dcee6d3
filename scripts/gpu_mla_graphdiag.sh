#!/usr/bin/env bash
# Session 24: is the benchmark's prefill figure (a CUDA graph of two calls, replayed) slower than single calls, and
# where? Runs the sparse MLA benchmark's prefill 4096 x 64 bf16 row with --graph-diag (each call's time inside graphs
# of one and two calls) for each build <dir>/<name>/bin/glm5rt_bench_sparse_mla (scripts/build_mla_bench_variant.sh)
# and each mode: the launcher's defaults (default), without programmatic launches (pdl0: GLM5RT_MLA_PDL=0), without
# the tail split (tail0: GLM5RT_MLA_TAIL=0) or both (pdl0tail0); RUNS processes each, interleaved.
#   D=<dir> NAMES="old new" MODES="default pdl0" RUNS=3 OUT=$OUT bash scripts/gpu_mla_graphdiag.sh      (device)
# $OUT/log.txt: every line; $OUT/summary.txt: per build and mode the medians of the single-call (event) and
# graph-of-two (auto) figures and of each call's time inside the graphs.
set -uo pipefail
D=${D:?set D}
OUT=${OUT:?set OUT}
mkdir -p "$OUT"
# The driver's view meanwhile, every 10 ms (instantaneous power where the driver reports it).
q=timestamp,clocks.sm,clocks.mem,power.draw.instant,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$q --format=csv -c 1 > /dev/null 2>&1 || q=${q/power.draw.instant,/}
nvidia-smi --query-gpu="$q" --format=csv -lms 10 > "$OUT/smi.csv" 2>&1 &
smi=$!
for run in $(seq 1 "${RUNS:-3}"); do
  for n in ${NAMES:?set NAMES}; do
  for mode in ${MODES:-default pdl0 tail0 pdl0tail0}; do
    envs=()
    case $mode in
      pdl0) envs=(GLM5RT_MLA_PDL=0) ;;
      tail0) envs=(GLM5RT_MLA_TAIL=0) ;;
      pdl0tail0) envs=(GLM5RT_MLA_PDL=0 GLM5RT_MLA_TAIL=0) ;;
    esac
    env "${envs[@]}" timeout 120 "$D/$n/bin/glm5rt_bench_sparse_mla" --no-sweep --quick --formats bf16 --variants 0 --T 1 --H 64 --prefill-T 4096 \
      --prefill-H 64 --reps 9 --graph-diag > "$OUT/t.txt" 2>&1 || { echo "$n $mode rc $?"; tail -3 "$OUT/t.txt"; }
    grep -E "^(prefill|graphdiag) " "$OUT/t.txt" | sed 's/  */ /g; s/ v1 .*//' | sed "s/^/$n:$mode run=$run /"
  done
  done
done | tee "$OUT/log.txt"
rm -f "$OUT/t.txt"
kill "$smi" 2> /dev/null
xz -f "$OUT/smi.csv"
python3 - "$OUT/log.txt" > "$OUT/summary.txt" <<'PY'
import re, statistics, sys, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    mode = line.split()[0]  # build:mode
    m = re.search(r"prefill .* auto ([\d.]+) us event ([\d.]+) us", line)
    if m:
        d[(mode, "graph of 2 (auto)")].append(float(m.group(1)))
        d[(mode, "single call (event)")].append(float(m.group(2)))
    m = re.search(r"graphdiag \S+ T=\d+ H=\d+ single (\w+) \d+: ([\d.]+) us, SM clock after it ([\d.]+) MHz", line)
    if m:
        d[(mode, "single, %s" % m.group(1))].append(float(m.group(2)))
        d[(mode, "MHz after single, %s" % m.group(1))].append(float(m.group(3)))
    m = re.search(r"graphdiag clock before the singles: ([\d.]+) MHz", line)
    if m:
        d[(mode, "MHz idle")].append(float(m.group(1)))
    m = re.search(r"graphdiag \S+ T=\d+ H=\d+ K=(\d) replay \d+:(.*)", line)
    if m:
        for i, v in re.findall(r"call(\d) ([\d.]+) us", m.group(2)):
            d[(mode, "graph of %s, call %s" % (m.group(1), i))].append(float(v))
for key in sorted(d):
    v = d[key]
    print("%-16s %-22s median %9.1f us  min %9.1f  max %9.1f  n=%d" % (key + (statistics.median(v), min(v), max(v), len(v))))
PY
cat "$OUT/summary.txt"

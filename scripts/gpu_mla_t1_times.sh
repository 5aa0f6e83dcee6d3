#!/usr/bin/env bash
# Session 14: where a T=1 sparse MLA call's time goes. Nsight Compute's duration of each kernel of the automatic plan
# (the main kernel and the chunked merge) at T=1 x H = 16, 64, 128 with bf16 records, caches not flushed and clocks not
# locked (as the graph-timed benchmark runs them), from binaries built on the development machine
# (scripts/prebuild_mla_sm90.sh; carry the bundle as for scripts/gpu_mla_s13.sh):
#   P=.carry/s14/prebuilt COMMIT=<sha> OUT=$OUT bash scripts/gpu_mla_t1_times.sh
# Prints, per shape, the median duration of each kernel over the profiled launches; the raw CSV goes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/lib/device_prebuilt.sh
NCU=$(find_ncu)
for H in ${T1_HS:-16 64 128}; do
  stamp "T=1 H=$H"
  timeout 200 "$NCU" --cache-control none --clock-control none --metrics gpu__time_duration.sum \
    -k "regex:sparse_mla" --launch-skip 20 --launch-count 40 --csv --print-units base \
    "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --reps 1 --T 1 --H "$H" --formats bf16 --variants 0 \
    > "$OUT/ncu-t1-h$H.csv" 2> "$OUT/ncu-t1-h$H.err"
  python3 - "$OUT/ncu-t1-h$H.csv" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]
ki, mi, vi = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
by = {}
for r in rows[1:]:
    if r[mi] == "gpu__time_duration.sum":
        by.setdefault(r[ki].split("(")[0], []).append(float(r[vi].replace(",", "")))
for k, v in by.items():
    print(f"  {k}: median {statistics.median(v):.0f} ns over {len(v)} launches (min {min(v):.0f}, max {max(v):.0f})")
PY
done
stamp done

#!/usr/bin/env bash
# Session 23: times several builds of the sparse MLA benchmark against each other, interleaved, on issue 6's bf16 shapes
# most sensitive to variant 14's step loop (T=128 x H=64 and prefill 4096 x 64 at top-k TOPKS, default 2048), so
# that builds differing only in how ptxas scheduled that loop can be told apart from the run-to-run noise (a build
# whose loop is identical to another's serves as the control). Each build: <dir>/<name>/bin/glm5rt_bench_sparse_mla
# (scripts/build_mla_bench_variant.sh on the development machine; one unit replaced per build).
#   D=.carry/s23/var NAMES="old v3 new" RUNS=3 OUT=$OUT bash scripts/gpu_mla_variants.sh          (device)
# Prints one line per timing; $OUT/summary.txt holds the medians. (scripts/gpu_mla_builds_ab.sh is the two-build
# form with the tests, every row and Nsight Compute counters; this one takes any number of builds, two rows.)
set -uo pipefail
D=${D:?set D}
OUT=${OUT:?set OUT}
mkdir -p "$OUT"
for run in $(seq 1 "${RUNS:-3}"); do
  for n in ${NAMES:?set NAMES}; do
    for k in ${TOPKS:-2048}; do
      timeout 120 "$D/$n/bin/glm5rt_bench_sparse_mla" --no-sweep --quick --formats bf16 --variants 0 --T 128 --H 64 \
        --prefill-T 4096 --prefill-H 64 --topk "$k" --reps 9 > "$OUT/t.txt" 2>&1 || echo "$n rc $?"
      grep -E "^(decode|prefill) " "$OUT/t.txt" | sed 's/  */ /g; s/ v1 .*//' | sed "s/^/$n topk=$k run=$run /"
    done
  done
done | tee "$OUT/log.txt"
rm -f "$OUT/t.txt"
python3 - "$OUT/log.txt" > "$OUT/summary.txt" <<'PY'
import re, statistics, sys, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) topk=(\d+) run=\d+ (decode|prefill) \S+ T= ?(\d+) H= ?(\d+) .*? auto ([\d.]+) us", line)
    if m:
        d[(m.group(3), m.group(4), m.group(2), m.group(1))].append(float(m.group(6)))
for key in sorted(d):
    v = d[key]
    print("%-8s T=%-5s topk=%-5s %-8s median %9.2f us  min %9.2f  max %9.2f  n=%d" % (key + (statistics.median(v), min(v), max(v), len(v))))
PY
cat "$OUT/summary.txt"

#!/usr/bin/env bash
# Where a sparse MLA kernel's warps wait (session 9): Nsight Compute's warp-state statistics and the per-SASS-line
# stall samples of one launch, from binaries built on the development machine (scripts/pack_prebuilt.sh).
#
#   CASES="reg_kernel:--formats fp8 --T 128 --H 8;wsr_kernel:--formats bf16 --T 1 --H 128" OUT=$OUT \
#     bash scripts/gpu_mla_stalls.sh                                                 (device, carry .carry/final)
# Each case is "<kernel name regex>:<benchmark flags>" (the benchmark adds --no-sweep --quick --reps 1); per case
# $OUT/stalls-<n>.txt (sections) and $OUT/sass-<n>.csv (the source page: one row per SASS instruction with its
# stall samples by reason). Summarise with: python3 scripts/lib/sass_stalls.py $OUT/sass-<n>.csv
set -uo pipefail
cd "$(dirname "$0")/.."
: "${CASES:?set CASES}"
source scripts/lib/device_prebuilt.sh
n=0
IFS=';' read -ra list <<< "$CASES"
for c in "${list[@]}"; do
  n=$((n + 1))
  name=${c%%:*} flags=${c#*:}
  stamp "case $n: $name ($flags)"
  # shellcheck disable=SC2086  # flags is a list
  timeout 200 ncu --kernel-name "regex:$name" --launch-skip 2 --launch-count 1 --section WarpStateStats \
    --section SchedulerStats --section SourceCounters --export "$OUT/rep-$n" -f \
    "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --reps 1 $flags > "$OUT/stalls-$n.txt" 2>&1
  ncu --import "$OUT/rep-$n.ncu-rep" --print-details all >> "$OUT/stalls-$n.txt" 2>&1
  ncu --import "$OUT/rep-$n.ncu-rep" --page source --csv --print-source sass > "$OUT/sass-$n.csv" 2>&1
  grep -E "Stall|Warp Cycles|Eligible|Issued Warp|Active Warps|No Eligible" "$OUT/stalls-$n.txt" | head -40
  python3 scripts/lib/sass_stalls.py "$OUT/sass-$n.csv" 2>&1 | head -60
  rm -f "$OUT/rep-$n.ncu-rep"
done
stamp end

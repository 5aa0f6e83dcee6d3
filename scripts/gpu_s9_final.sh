#!/usr/bin/env bash
# Session 9's closing device call, from binaries built on the development machine (scripts/pack_prebuilt.sh):
# the whole release check (every GPU test, the sm_120 ptxas / SASS report, the benchmarks of
# scripts/gpu_release_check.sh with FULL=1), issue 6's benchmark of record (scripts/gpu_mla.sh with the Triton
# baseline and the machine's ceilings), then the small-T plan sweep of both record formats (T = 1, 2, 4, 8), whose
# best plans are compared with kMeasuredPlans afterwards. Each part's files come back as one archive in $OUT.
#
#   rm -rf .carry/final && bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt \
#     && rm -rf .carry/final/prebuilt                                                               (here)
#   COMMIT=<sha> OUT=$OUT bash scripts/gpu_s9_final.sh                          (device, carry .carry/final)
# Optional: PARTS (default "check mla sweep").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/lib/device_prebuilt.sh
parts=" ${PARTS:-check mla sweep} "
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  if [[ $parts == *" check "* ]]; then
    stamp "release check (FULL=1)"
    mkdir -p "$OUT/rc"
    FULL=1 COMMIT=$COMMIT OUT=$OUT/rc bash scripts/gpu_release_check.sh > "$OUT/rc/run.txt" 2>&1
    grep -E "test cases|assertions|Status" "$OUT/rc/check.txt" | tail -3
    tar -czf "$OUT/rc.tgz" -C "$OUT" rc && rm -rf "$OUT/rc"
  fi
  if [[ $parts == *" mla "* ]]; then
    stamp "issue 6 benchmark of record (Triton baseline, ceilings)"
    mla_record
  fi
  if [[ $parts == *" sweep "* ]]; then
    for f in fp8 bf16; do
      stamp "plan sweep $f"
      timeout 200 "$B/glm5rt_bench_sparse_mla" --plan-sweep --no-sweep --quick --formats $f --T 1,2,4,8 \
        --H 8,16,32,64,128 --reps 9 --commit "$COMMIT" --json "$OUT/plans-$f.json" > "$OUT/plans-$f-log.txt" 2>&1
      tail -2 "$OUT/plans-$f-log.txt"
    done
  fi
  stamp end
} 2>&1 | tee "$OUT/s9-final-log.txt"

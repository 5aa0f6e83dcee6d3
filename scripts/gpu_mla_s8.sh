#!/usr/bin/env bash
# Session 8 (device): the sparse MLA main kernels as programmatic dependent launches (KernelArgs::pdl; the kernels
# wait in wait_for_predecessor() before any global access; GLM5RT_MLA_PDL=0 launches them plainly): the whole GPU
# test binary with PDL on (the sparse MLA cases and the forward / graph-replay cases that run the kernels beside
# others), the GLM-5 rows with PDL off / on / off / on (one process each: the flag is read once), then the small-T
# plan sweep with PDL on (the launch gap it hides is part of what a split costs). Binaries from
# scripts/pack_prebuilt.sh.
#
#   rm -rf .carry/final && bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt && rm -rf .carry/final/prebuilt
#   COMMIT=<sha> [SWEEP=0] [TESTS=0] OUT=$OUT bash scripts/gpu_mla_s8.sh      (device, carry .carry/final)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/device_prebuilt.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  if [ "${TESTS:-1}" = 1 ]; then
    stamp "GPU tests, PDL on (commit $COMMIT)"
    timeout 300 "$B/glm5rt_gpu_tests" 2>&1 | tail -4
  fi
  n=0
  for v in ${PDL_VALUES:-0 1 0 1}; do
    n=$((n + 1))
    stamp "bench, GLM5RT_MLA_PDL=$v"
    GLM5RT_MLA_PDL=$v timeout 200 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --T 1,2,4,8,32,128 --H 8,16,64,128 \
      --variants 11 --prefill-T 4096 --prefill-H 64 --reps 9 --commit "$COMMIT" --json "$OUT/s8-pdl$v-run$n.json" 2>&1 |
      grep -E "^(decode|prefill) |copy" | sed 's/  */ /g; s/ v1 0.00 v2 0.00 v3 0.00//; s/ v7 0.00 us (0 splits)//'
  done
  if [ "${SWEEP:-1}" = 1 ]; then
    stamp "plan sweep, PDL on"
    timeout 200 "$B/glm5rt_bench_sparse_mla" --plan-sweep --no-sweep --quick --formats bf16 --T 1,2,4,8 --H 8,16,32,64,128 \
      --reps 9 --commit "$COMMIT" --json "$OUT/s8-plans.json" > "$OUT/s8-plans-log.txt" 2>&1
    tail -30 "$OUT/s8-plans-log.txt"
  fi
  stamp end
} 2>&1 | tee "$OUT/s8-log.txt"

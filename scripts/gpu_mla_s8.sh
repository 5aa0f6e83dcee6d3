#!/usr/bin/env bash
# Session 8 (device): the sparse MLA main kernels as programmatic dependent launches (KernelArgs::pdl; the kernels
# wait in wait_for_predecessor() before any global access). GLM5RT_MLA_PDL: 0 = plain launches (before session 8),
# 1 = PDL, the combine kernels releasing the next main kernel at their start, 2 = PDL, the combine releasing it
# only at its completion. The GPU tests (TEST_FILTER, default the whole binary) with TEST_PDL, the GLM-5 rows once
# per entry of PDL_VALUES (one process each: the flag is read once), then the small-T plan sweep once per entry
# of SWEEP_VALUES (the launch gap PDL hides is part of what a split costs). Binaries from scripts/pack_prebuilt.sh.
#
#   rm -rf .carry/final && bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt && rm -rf .carry/final/prebuilt
#   COMMIT=<sha> [PDL_VALUES="0 1 0 1"] [SWEEP_VALUES=1] [TEST_PDL=0|1|2] [TEST_FILTER='*sparse MLA*'] [TESTS=0] [NCU_T1=1] \
#     OUT=$OUT bash scripts/gpu_mla_s8.sh                                       (device, carry .carry/final)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/device_prebuilt.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  if [ "${TESTS:-1}" = 1 ]; then
    stamp "GPU tests ${TEST_FILTER:-(all)}, GLM5RT_MLA_PDL=${TEST_PDL:-(default)} (commit $COMMIT)"
    env ${TEST_PDL:+GLM5RT_MLA_PDL=$TEST_PDL} timeout 300 "$B/glm5rt_gpu_tests" ${TEST_FILTER:+-tc="$TEST_FILTER"} 2>&1 | tail -4
  fi
  n=0
  for v in ${PDL_VALUES-0 1 0 1}; do
    n=$((n + 1))
    stamp "bench, GLM5RT_MLA_PDL=$v"
    GLM5RT_MLA_PDL=$v timeout 200 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --T "${TS:-1,2,4,8,32,128}" \
      --H "${HS:-8,16,32,64,128}" --variants 11 --prefill-T 4096 --prefill-H 64 --reps 9 --commit "$COMMIT" \
      --json "$OUT/s8-pdl$v-run$n.json" 2>&1 | grep -E "^(decode|prefill) |copy" |
      sed 's/  */ /g; s/ v1 0.00 v2 0.00 v3 0.00//; s/ v7 0.00 us (0 splits)//; s/ v5 0.00 us (0 splits) v10 0.00//'
  done
  for v in ${SWEEP_VALUES-1}; do
    stamp "plan sweep, GLM5RT_MLA_PDL=$v"
    GLM5RT_MLA_PDL=$v timeout 200 "$B/glm5rt_bench_sparse_mla" --plan-sweep --no-sweep --quick --formats "${SWEEP_FORMATS:-bf16}" \
      --T 1,2,4,8 --H 8,16,32,64,128 --reps 9 --commit "$COMMIT" --json "$OUT/s8-plans-pdl$v.json" > "$OUT/s8-plans-pdl$v-log.txt" 2>&1
    tail -3 "$OUT/s8-plans-pdl$v-log.txt"
  done
  if [ "${NCU_T1:-0}" = 1 ]; then
    # Where a T=1 call's time goes: each kernel of the first calls alone (Nsight Compute serializes them).
    NCU=$(find_ncu)
    for h in 64 128; do
      stamp "Nsight Compute: kernel durations, bf16 T=1 H=$h"
      timeout 120 "$NCU" --metrics gpu__time_duration.sum,sm__cycles_active.avg --launch-count 12 -k regex:sparse_mla \
        "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --T 1 --H "$h" --formats bf16 --variants 11 --reps 1 \
        > "$OUT/ncu-t1-h$h.txt" 2>&1
      grep -E "^  [a-z_ ].*sparse_mla|gpu__time_duration|sm__cycles_active" "$OUT/ncu-t1-h$h.txt" | head -36
    done
  fi
  stamp end
} 2>&1 | tee "$OUT/s8-log.txt"

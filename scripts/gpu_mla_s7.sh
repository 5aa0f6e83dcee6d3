#!/usr/bin/env bash
# Session 7 (device): kernel_variant 11 (one 8-warp consumer group for a CTA's 32 heads) against variant 10: every
# sparse MLA test case (variant 11 is in every variant x merge loop and in the multi-pool list), the bf16 rows
# where 32 heads share a CTA (twice, to see the noise), the SASS of the new kernel (spills, instruction mix), then
# Nsight Compute of both at T=128 H=64. Binaries from scripts/pack_prebuilt.sh.
#
#   rm -rf .carry/final && bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt && rm -rf .carry/final/prebuilt
#   COMMIT=<sha> [PROFILE=0] [TESTS=0] OUT=$OUT bash scripts/gpu_mla_s7.sh      (device, carry .carry/final)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/device_prebuilt.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  if [ "${TESTS:-1}" = 1 ]; then
    stamp "tests (commit $COMMIT)"
    timeout 240 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" 2>&1 | tail -4
  fi
  for run in 1 2; do
    stamp "bench run $run"
    timeout 200 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats bf16 --T 1,8,32,128 --H 64,128 --variants 5,10,11 \
      --prefill-T 1024,4096 --prefill-H 64 --reps 9 --commit "$COMMIT" --json "$OUT/sparse_mla-h200-s7-v11-run$run.json" 2>&1 |
      grep -E "^(decode|prefill)" | sed 's/  */ /g; s/ v1 0.00 v2 0.00 v3 0.00//; s/ v7 0.00 us (0 splits)//'
  done
  stamp "sass of variant 11 (sm_90)"
  CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  "$CUOBJDUMP" -sass "$B/glm5rt_bench_sparse_mla" 2>&1 |
    awk '/Function : / {p = ($0 ~ /sparse_mla_wsg_kernel/)} p' > "$OUT/wsg-sm90.sass"
  echo "SASS lines $(wc -l < "$OUT/wsg-sm90.sass"); STL $(grep -c STL "$OUT/wsg-sm90.sass"), LDL $(grep -c LDL "$OUT/wsg-sm90.sass"), HMMA $(grep -c HMMA "$OUT/wsg-sm90.sass"), LDSM $(grep -c LDSM "$OUT/wsg-sm90.sass")"
  grep -n "STL\|LDL" "$OUT/wsg-sm90.sass" | head -20
  stamp end
} 2>&1 | tee "$OUT/s7-log.txt"
[ "${PROFILE:-1}" = 1 ] && SET=v11 OUT=$OUT bash scripts/gpu_mla_profile.sh

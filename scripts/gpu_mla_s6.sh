#!/usr/bin/env bash
# Session 6 (device): kernel_variant 10 (variant 5 with the softmax in registers) against variant 5: every sparse
# MLA test case (variant 10 is in every variant x merge loop and in the multi-pool list), the bf16 rows where
# 16 / 32 heads per CTA run, then Nsight Compute of both at T=128 H=64. Binaries from scripts/pack_prebuilt.sh.
#
#   rm -rf .carry/final && bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt && rm -rf .carry/final/prebuilt
#   COMMIT=<sha> [PROFILE=0] OUT=$OUT bash scripts/gpu_mla_s6.sh      (device, carry .carry/final)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/device_prebuilt.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  stamp "tests (commit $COMMIT)"
  "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" 2>&1 | tail -4
  stamp bench
  "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats bf16 --T 1,8,128 --H 16,64,128 --variants 5,10 \
    --prefill-T 1024,4096 --prefill-H 16,64 --reps 9 --commit "$COMMIT" --json "$OUT/sparse_mla-h200-s6-v10.json" 2>&1 |
    grep -E "^(decode|prefill)"
  stamp end
} 2>&1 | tee "$OUT/s6-log.txt"
[ "${PROFILE:-1}" = 1 ] && SET=v10 OUT=$OUT bash scripts/gpu_mla_profile.sh

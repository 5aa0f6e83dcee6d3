#!/usr/bin/env bash
# A / B of a sparse MLA tuning variable (read once per process, so one process per value), from binaries built
# on the development machine (scripts/pack_prebuilt.sh): the sparse MLA tests with TEST_VALUE, then the
# benchmark once per entry of VALUES (repeat a value to see the run-to-run noise), JSON per value into $OUT.
#
#   bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt && rm -rf .carry/final/prebuilt   (here)
#   VAR=GLM5RT_MLA_WS_COPY_WARPS VALUES="1 4 2 1 4 2" TEST_VALUE=4 COMMIT=<hash> OUT=$OUT \
#     bash scripts/gpu_mla_env_ab.sh                                               (device, carry .carry/final)
# Optional: TS (query tokens, default 8,128), HS (heads, default 8,16,64), VARIANTS (default 5), PREFILL (4096),
# EXTRA (more benchmark flags, e.g. "--v7-splits 2,3,4" for VAR=GLM5RT_MLA_REG4 VARIANTS=5,7 HS=8,16).
set -uo pipefail
cd "$(dirname "$0")/.."
: "${VAR:?set VAR}" "${VALUES:?set VALUES}"
source scripts/lib/device_prebuilt.sh
{
  if [ -n "${TEST_VALUE:-}" ]; then
    stamp "sparse MLA tests, $VAR=$TEST_VALUE"
    env "$VAR=$TEST_VALUE" timeout 200 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" 2>&1 | tail -3
  fi
  n=0
  for v in $VALUES; do
    n=$((n + 1))
    stamp "bench, $VAR=$v"
    # shellcheck disable=SC2086  # EXTRA is a list of flags
    env "$VAR=$v" timeout 150 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --T "${TS:-8,128}" --H "${HS:-8,16,64}" \
      --variants "${VARIANTS:-5}" --prefill-T "${PREFILL:-4096}" --prefill-H 64 --reps 9 ${EXTRA:-} --commit "$COMMIT" \
      --json "$OUT/sparse_mla-ab-$v-run$n.json" 2>&1 | grep -E "^(decode|prefill) |copy|forced" |
      sed 's/  */ /g; s/ v1 0.00 v2 0.00 v3 0.00//; s/ v7 0.00 us (0 splits)//'
  done
  stamp end
} 2>&1 | tee "$OUT/ab.txt"

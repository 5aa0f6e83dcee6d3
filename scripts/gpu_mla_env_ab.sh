#!/usr/bin/env bash
# A / B of a sparse MLA tuning variable (read once per process, so one process per value), from binaries built
# on the development machine (scripts/pack_prebuilt.sh): the sparse MLA tests with TEST_VALUE, then the
# benchmark once per entry of VALUES (repeat a value to see the run-to-run noise), JSON per value.
#
#   bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt && rm -rf .carry/final/prebuilt   (here)
#   VAR=GLM5RT_MLA_WS_COPY_WARPS VALUES="1 4 2 1 4 2" TEST_VALUE=4 COMMIT=<hash> OUT=$OUT \
#     bash scripts/gpu_mla_env_ab.sh                                               (device, carry .carry/final)
# Optional: TS (query tokens, default 8,128), HS (heads, default 8,16,64), VARIANTS (default 5), PREFILL (4096),
# EXTRA (more benchmark flags, e.g. "--v7-splits 2,3,4" for VAR=GLM5RT_MLA_REG4 VARIANTS=5,7 HS=8,16).
# Since session 15 this is scripts/gpu_mla_s13.sh's tests and bench parts with these defaults (the same benchmark
# command; before, its own loop): the log and bench-<value>-run<n>.json files are in $OUT/s13.tgz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
: "${VAR:?set VAR}" "${VALUES:?set VALUES}"
PARTS="${TEST_VALUE:+tests }bench" TEST_ENV="${TEST_VALUE:+$VAR=$TEST_VALUE}" TEST_TIMEOUT=200 \
  AB_VAR="$VAR" AB_VALUES="$VALUES" BENCH_TS="${TS:-8,128}" BENCH_HS="${HS:-8,16,64}" BENCH_VARIANTS="${VARIANTS:-5}" \
  BENCH_PT="${PREFILL:-4096}" BENCH_PH=64 BENCH_EXTRA="${EXTRA:-}" bash scripts/gpu_mla_s13.sh

#!/usr/bin/env bash
# Session 5: variant 7's 8-head FP8 kernel four CTAs per SM (GLM5RT_MLA_REG4=1: 4-slot ring, <= 128 registers)
# against three (0), from binaries built on the development machine (scripts/pack_prebuilt.sh): every sparse
# MLA test case with the option on, then the FP8 rows (and bf16 for the ratio) once per setting (separate
# processes: the variable is read once), with forced split counts for variant 7 at T=128.
#
#   bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt && rm -rf .carry/final/prebuilt   (here)
#   COMMIT=<hash> OUT=$OUT bash scripts/gpu_mla_s5_fp8.sh                          (device, carry .carry/final)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
P=${P:-.carry/final/prebuilt}
COMMIT=${COMMIT:-unknown}
[ -d "$P" ] || tar -xJf "$P.tar.xz" -C "$(dirname "$P")"
export LD_LIBRARY_PATH=$PWD/$P/lib
src=$(cat "$P/SOURCE_DIR")  # the fixtures' path compiled into the tests
if [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -sfn "$PWD" "$src"; fi
B=$PWD/$P/bin
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
{
  stamp "sparse MLA tests, GLM5RT_MLA_REG4=1"
  GLM5RT_MLA_REG4=1 timeout 200 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" 2>&1 | tail -3
  for r in 0 1; do
    stamp "bench, GLM5RT_MLA_REG4=$r"
    GLM5RT_MLA_REG4=$r timeout 150 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --T ${TS:-1,8,128} \
      --H ${HS:-8,16} --variants 5,7 --v7-splits ${V7S:-2,3,4,6,8} --reps 9 --commit "$COMMIT" \
      --json "$OUT/sparse_mla-h200-s5-reg4-$r.json" 2>&1 | grep -E "^(decode|prefill) |copy|forced" |
      sed 's/  */ /g; s/ v1 0.00 v2 0.00 v3 0.00//'
  done
  stamp end
} 2>&1 | tee "$OUT/fp8.txt"

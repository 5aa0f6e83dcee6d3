#!/usr/bin/env bash
# Session 5: variant 5's L2 prefetch of the records a few steps ahead (GLM5RT_MLA_L2_PREFETCH = steps; 0 = off),
# from binaries built on the development machine (scripts/pack_prebuilt.sh): the sparse MLA tests with the
# prefetch on, then the bf16 rows once per distance (separate processes: the variable is read once).
#
#   bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt && rm -rf .carry/final/prebuilt   (here)
#   COMMIT=<hash> OUT=$OUT bash scripts/gpu_mla_s5_l2.sh                           (device, carry .carry/final)
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
  stamp "sparse MLA tests, GLM5RT_MLA_L2_PREFETCH=4"
  GLM5RT_MLA_L2_PREFETCH=4 timeout 200 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" 2>&1 | tail -3
  for d in ${DISTS:-0 4 8 0 4 8}; do
    stamp "bench, GLM5RT_MLA_L2_PREFETCH=$d"
    GLM5RT_MLA_L2_PREFETCH=$d timeout 150 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --T ${TS:-8,128} \
      --H ${HS:-8,16,64} --variants 5 --prefill-T 4096 --prefill-H 64 --reps 9 --commit "$COMMIT" \
      --json "$OUT/sparse_mla-h200-s5-l2-$d.json" 2>&1 | grep -E "^(decode|prefill) +bf16|copy" |
      sed 's/  */ /g; s/ v1 0.00 v2 0.00 v3 0.00//; s/ v7 0.00 us (0 splits)//'
  done
  stamp end
} 2>&1 | tee "$OUT/l2.txt"

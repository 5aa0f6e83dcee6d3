#!/usr/bin/env bash
# Session 5: variant 5 with its two consumer groups held half a step apart (GLM5RT_MLA_WS_PHASE = 1: the second
# group starts a step when the first enters its softmax; 2: when the first has stored P), against the
# groups in phase (0), from binaries built on the development machine (scripts/pack_prebuilt.sh). Every sparse
# MLA test case with the offset on, then the benchmark once per setting (separate processes: the variable is
# read once), then (PROFILE=1) Nsight Compute of variant 5 at T=128 H=64 with the offset.
#
#   bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt && rm -rf .carry/final/prebuilt   (here)
#   COMMIT=<hash> OUT=$OUT bash scripts/gpu_mla_s5_phase.sh                        (device, carry .carry/final)
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
  for ph in ${TEST_PHASES:-1 2}; do
    stamp "sparse MLA tests, GLM5RT_MLA_WS_PHASE=$ph"
    GLM5RT_MLA_WS_PHASE=$ph timeout 200 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" 2>&1 | tail -3
  done
  for ph in 0 1 2; do
    stamp "bench, GLM5RT_MLA_WS_PHASE=$ph"
    GLM5RT_MLA_WS_PHASE=$ph timeout 150 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --T ${TS:-1,8,128} \
      --H ${HS:-16,64,128} --variants 5 --prefill-T 4096 --prefill-H 64 --reps 9 --commit "$COMMIT" \
      --json "$OUT/sparse_mla-h200-s5-phase$ph.json" 2>&1 | grep -E "^(decode|prefill) +bf16|copy" |
      sed 's/  */ /g; s/ v1 0.00 v2 0.00 v3 0.00//; s/ v7 0.00 us (0 splits)//'
  done
  if [ -n "${PROFILE:-}" ]; then
    stamp "ncu: variant 5 at T=128 H=64, GLM5RT_MLA_WS_PHASE=${PROFILE_PHASE:-1}"
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    GLM5RT_MLA_WS_PHASE=${PROFILE_PHASE:-1} timeout 120 "$NCU" --clock-control none --set full --import-source no \
      -k "regex:sparse_mla_ws_kernel" --launch-count 1 -f -o "$OUT/v5p" "$B/glm5rt_bench_sparse_mla" --no-sweep \
      --quick --reps 1 --T 128 --H 64 --variants 5 > "$OUT/v5p-run.txt" 2>&1
    "$NCU" -i "$OUT/v5p.ncu-rep" --page details > "$OUT/v5p-details.txt" 2>&1
    "$NCU" -i "$OUT/v5p.ncu-rep" --page source --csv --print-source sass > "$OUT/v5p-sass.csv" 2>&1
    rm -f "$OUT/v5p.ncu-rep"
    python3 bench/sparse_mla/sass_stalls.py "$OUT/v5p-sass.csv" --top 10 > "$OUT/v5p-stalls.txt" 2>&1
    grep -E "Duration|Issue Slots Busy|Eligible Warps" "$OUT/v5p-details.txt" | head -4
  fi
  stamp end
} 2>&1 | tee "$OUT/phase.txt"

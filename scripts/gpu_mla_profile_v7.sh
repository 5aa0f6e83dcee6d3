#!/usr/bin/env bash
# Nsight Compute of sparse MLA variant 7 (FP8 records, 8 heads per CTA) at T=128 H=8, four CTAs per SM
# (GLM5RT_MLA_REG4=1) and three (0): details page and the stall summary (bench/sparse_mla/sass_stalls.py).
#
#   bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt && rm -rf .carry/final/prebuilt   (here)
#   OUT=$OUT bash scripts/gpu_mla_profile_v7.sh                                    (device, carry .carry/final)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
P=${P:-.carry/final/prebuilt}
[ -d "$P" ] || tar -xJf "$P.tar.xz" -C "$(dirname "$P")"
export LD_LIBRARY_PATH=$PWD/$P/lib
B=$PWD/$P/bin/glm5rt_bench_sparse_mla
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for r in ${REGS:-1 0}; do
  n=v7-reg4-$r
  GLM5RT_MLA_REG4=$r timeout 150 "$NCU" --clock-control none --set full --import-source no \
    -k "regex:sparse_mla_reg_kernel" --launch-count 1 -f -o "$OUT/$n" "$B" --no-sweep --quick --reps 1 --T 128 \
    --H 8 --variants 7 > "$OUT/$n-run.txt" 2>&1
  "$NCU" -i "$OUT/$n.ncu-rep" --page details > "$OUT/$n-details.txt" 2>&1
  "$NCU" -i "$OUT/$n.ncu-rep" --page source --csv --print-source sass > "$OUT/$n-sass.csv" 2>&1
  rm -f "$OUT/$n.ncu-rep"
  python3 bench/sparse_mla/sass_stalls.py "$OUT/$n-sass.csv" --top 25 > "$OUT/$n-stalls.txt" 2>&1
  echo "== $n"; grep -E "Duration|DRAM Throughput|Issue Slots Busy|Eligible Warps|Active Warps Per|L1/TEX Cache Thr|L2 Cache Thr|Registers Per" "$OUT/$n-details.txt" | head -9
  head -14 "$OUT/$n-stalls.txt"
  rm -f "$OUT/$n-sass.csv"
done

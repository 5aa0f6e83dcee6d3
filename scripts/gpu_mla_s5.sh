#!/usr/bin/env bash
# Session 5: the alternating-step sparse MLA kernel (kernel_variant 9) on the device, from binaries built on the
# (variant 9 was measured slower and removed after these calls: run this at commit 19294ff, where it exists;
# on later commits the variant-9 rows fail as invalid parameters.)
# development machine (scripts/pack_prebuilt.sh): every sparse MLA test case (all variants incl. 9 against the
# float32 reference), the benchmark rows of variant 9 against variant 5 / the automatic kernel in the same
# process, and (PROFILE=1) an Nsight Compute look at variant 9 at T=128 H=64 (details + per-instruction SASS).
#
#   bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt && rm -rf .carry/final/prebuilt   (here)
#   COMMIT=<hash> OUT=$OUT bash scripts/gpu_mla_s5.sh                              (device, carry .carry/final)
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
  stamp "sparse MLA tests (every variant x merge, incl. 9)"
  timeout 200 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" 2>&1 | tail -4
  stamp "bench: T = 1, 8, 128 x H = 64, 128; prefill 4096 x 64 (variants 5, 9)"
  timeout 150 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --T ${TS:-1,8,128} --H ${HS:-64,128} --variants 5,9 \
    --prefill-T 4096 --prefill-H 64 --reps 9 --commit "$COMMIT" --json "$OUT/sparse_mla-h200-s5.json" 2>&1 |
    grep -E "^(decode|prefill) +bf16|copy|GEMM" | sed 's/  */ /g'
  if [ -n "${PROFILE:-}" ]; then
    stamp "ncu: variant 9 at T=128 H=64"
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    timeout 120 "$NCU" --clock-control none --set full --import-source no -k "regex:sparse_mla_alt_kernel" \
      --launch-count 1 -f -o "$OUT/v9" "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --reps 1 --T 128 --H 64 \
      --variants 9 > "$OUT/v9-run.txt" 2>&1
    "$NCU" -i "$OUT/v9.ncu-rep" --page details > "$OUT/v9-details.txt" 2>&1
    "$NCU" -i "$OUT/v9.ncu-rep" --page source --csv --print-source sass > "$OUT/v9-sass.csv" 2>&1
    rm -f "$OUT/v9.ncu-rep"
    grep -E "Duration|Compute \(SM\) Throughput|Registers Per|Issue Slots Busy|L1/TEX Cache|Eligible Warps" "$OUT/v9-details.txt" | head
  fi
  stamp end
} 2>&1 | tee "$OUT/s5.txt"

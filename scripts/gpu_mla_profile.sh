#!/usr/bin/env bash
# Nsight Compute look at the sparse MLA kernels behind issue 6's missed targets (session 5, call 1): where
# the time of one kernel goes (tensor / shared-memory pipe use, warp stall reasons, the instructions the
# stalls sit on), from binaries built on the development machine (scripts/pack_prebuilt.sh).
#
#   bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt && rm -rf .carry/final/prebuilt   (here)
#   OUT=$OUT bash scripts/gpu_mla_profile.sh                                   (device, carry .carry/final)
#
# One kernel per shape: bf16 T=128 H=64 (the 250 TFLOP/s target; kernel_variant 5), FP8 and bf16 at T=128 H=8
# (the 1.6x target), bf16 T=1 H=128 (the 10 us target). Text reports (details page and the per-instruction
# SASS page with stall samples) go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
P=${P:-.carry/final/prebuilt}
[ -d "$P" ] || tar -xJf "$P.tar.xz" -C "$(dirname "$P")"
export LD_LIBRARY_PATH=$PWD/$P/lib
B=$PWD/$P/bin/glm5rt_bench_sparse_mla
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || echo /usr/local/cuda/bin/ncu)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/device.txt" 2>&1
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }

# profile NAME KERNEL_REGEX SKIP BENCH_ARGS...
profile() {
  local name=$1 re=$2 skip=$3; shift 3
  stamp "profile $name"
  timeout 200 "$NCU" --clock-control none --set full --import-source no -k "regex:$re" --launch-skip "$skip" \
    --launch-count 1 -f -o "$OUT/$name" "$B" --no-sweep --quick --reps 1 "$@" > "$OUT/$name-run.txt" 2>&1
  tail -3 "$OUT/$name-run.txt"
  "$NCU" -i "$OUT/$name.ncu-rep" --page details > "$OUT/$name-details.txt" 2>&1
  "$NCU" -i "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/$name-sass.csv" 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Registers Per|Issue Slots Busy|No Eligible|Active Warps Per Scheduler|Eligible Warps|Warp Cycles Per Issued|Shared Memory" "$OUT/$name-details.txt" | head -20
  rm -f "$OUT/$name.ncu-rep"
}
{
  profile h64_bf16 "sparse_mla_ws_kernel" 0 --T 128 --H 64 --variants 5
  profile h8_fp8 "sparse_mla_reg_kernel" 0 --T 128 --H 8 --variants 7
  profile h8_bf16 "sparse_mla_(ws|pipe)_kernel" 0 --T 128 --H 8 --variants 5
  profile t1_h128 "sparse_mla_(ws|pipe|kernel)" 0 --T 1 --H 128 --variants 2
  stamp end
} 2>&1 | tee "$OUT/profile.txt"

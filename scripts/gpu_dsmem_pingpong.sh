#!/usr/bin/env bash
# Distributed-shared-memory round trips between a cluster's two CTAs against the same exchange inside one CTA
# (bench/sparse_mla/dsmem_pingpong.cu; the cost of a per-step partial-score swap across a CTA pair). Builds with nvcc
# on the device (sm_90; clusters need it) and writes $OUT/dsmem-pingpong.json.
#   OUT=$OUT bash scripts/gpu_dsmem_pingpong.sh        (device)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
nvcc -O3 -std=c++17 -I. -arch=sm_90 -o "$OUT/dsmem_pingpong" bench/sparse_mla/dsmem_pingpong.cu
for run in 1 2; do "$OUT/dsmem_pingpong" --iters 20000 --json "$OUT/dsmem-pingpong-run$run.json"; done
rm -f "$OUT/dsmem_pingpong"

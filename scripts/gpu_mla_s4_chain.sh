#!/usr/bin/env bash
# Session 4 (mla-chain) device call: kernel_variant 5 (bf16 records) with each consumer chain, one process per
# chain (GLM5RT_MLA_V5_CHAIN is read once): 1 = the shorter chain of sparse_mla_chain.cuh (opt-in), 0 = the
# previous chain (the default); bench rows T = 8, 128 x H = 8, 16, 64 and prefill 4096 x 64; then every sparse MLA
# GPU test once per chain (the planner grids once, default chain). (The call measured in PERFORMANCE.md ran the
# version at 5c4fcdf, where 2 was the shorter chain and 1 a GEMM1-only form, since removed.)
# JSON and logs in $OUT (5 files), summary printed last.
#   P=<dir with bin/ from scripts/prebuild_mla_sm90.sh> OUT=<dir> bash scripts/gpu_mla_s4_chain.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true
B=$P/bin
ARGS=(--no-sweep --quick --T 8,128 --H 8,16,64 --prefill-T 4096 --prefill-H 64 --variants 5 --reps 9)
rcs=""
for m in 1 0; do
  echo "#### GLM5RT_MLA_V5_CHAIN=$m" >> "$OUT/bench.txt"
  GLM5RT_MLA_V5_CHAIN=$m timeout 100 "$B/glm5rt_bench_sparse_mla" "${ARGS[@]}" --json "$OUT/chain$m.json" >> "$OUT/bench.txt" 2>&1
  rcs="$rcs bench$m=$?"
done
for m in 1 0; do
  GLM5RT_MLA_V5_CHAIN=$m timeout 90 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" -tce="*planner choices*" > "$OUT/tests$m.txt" 2>&1
  rcs="$rcs tests$m=$?"
done
timeout 40 "$B/glm5rt_gpu_tests" -tc="*planner choices*" >> "$OUT/tests0.txt" 2>&1
rcs="$rcs grids=$?"
echo "== bench (auto = variant 5 at these shapes; v5 column forced) =="
grep -E "^####|^(decode|prefill) +bf16" "$OUT/bench.txt" | sed -E 's/  v1 .*  v5/  v5/; s/  v6 .*//; s/ +/ /g'
grep -E "WARNING|error" "$OUT/bench.txt" | head -5
for m in 1 0; do
  echo "== tests, GLM5RT_MLA_V5_CHAIN=$m =="
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/tests$m.txt" | head -12
  echo "v5/auto bf16 worst rel L2: $(grep -E "kernel (5|0) " "$OUT/tests$m.txt" | grep -E " bf16 " | grep -oE "rel L2 [0-9.e+-]+" | sort -k3 -g | tail -1);" \
    "worst LSE: $(grep -E "kernel (5|0) " "$OUT/tests$m.txt" | grep -E " bf16 " | grep -oE "worst lse err [0-9.e+-]+" | sort -k4 -g | tail -1)"
  gzip -9 -f "$OUT/tests$m.txt"
done
echo "exit codes:$rcs"

#!/usr/bin/env bash
# Sparse MLA round 6 device call: kernel_variant 7 (FP8 records converted in registers) timed beside
# variant 2 and the automatic choice (bf16 and FP8) at T = 1, 8, 128 x H = 8, 16, 64, then every sparse MLA
# GPU test (variant 7 in every loop; the planner grids last) and the multi-pool test. JSON and logs in $OUT, summary printed last.
#   P=<dir with bin/ from scripts/prebuild_mla_sm90.sh> OUT=<dir> bash scripts/gpu_mla_round6.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true
B=$P/bin
timeout 50 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --T 1,8,128 --H 8,16,64 --variants 2,7 --v7-splits 3,4 --reps 9 \
  --json "$OUT/sparse_mla_round6.json" > "$OUT/bench_round6.txt" 2>&1
bench_rc=$?
timeout 60 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" -tce="*planner choices*" > "$OUT/tests.txt" 2>&1
test_rc=$?
timeout 30 "$B/glm5rt_gpu_tests" -tc="*planner choices*" >> "$OUT/tests.txt" 2>&1
grid_rc=$?
grep -E "kernel 7 " "$OUT/tests.txt" | grep -oE "worst lse err [0-9.e+-]+" | sort -k4 -g | tail -1 > "$OUT/v7_worst_lse.txt"
grep -E "kernel 7 " "$OUT/tests.txt" | grep -oE "rel L2 [0-9.e+-]+" | sort -k3 -g | tail -1 > "$OUT/v7_worst_l2.txt"
grep -E "kernel 2 " "$OUT/tests.txt" | grep -E " fp8 " | grep -oE "rel L2 [0-9.e+-]+" | sort -k3 -g | tail -1 > "$OUT/v2_fp8_worst_l2.txt"
gzip -9 -f "$OUT/tests.txt"
echo "== variants (v2, v7 = FP8 in registers) =="
grep -E "^decode|v7 T=" "$OUT/bench_round6.txt"
grep -E "WARNING|error" "$OUT/bench_round6.txt" | head -5
echo "== tests =="
zcat "$OUT/tests.txt.gz" | grep -E "ERROR|FAILED|test cases|assertions" | head -20
echo "variant 7 worst LSE: $(cat "$OUT/v7_worst_lse.txt"); worst rel L2 v7: $(cat "$OUT/v7_worst_l2.txt"), v2 fp8: $(cat "$OUT/v2_fp8_worst_l2.txt")"
echo "exit codes: bench $bench_rc, tests $test_rc, grids $grid_rc"

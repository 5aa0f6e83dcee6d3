#!/usr/bin/env bash
# Session 4 (mla-chain) device call: kernel_variant 5 with the shorter consumer chain (sparse_mla_chain.cuh,
# the default) and with the previous chain (GLM5RT_MLA_V5_CHAIN=0), each in its own process (the variable is
# read once), at T = 8, 128 x H = 8, 16, 64 and prefill 4096 x 64; then every sparse MLA GPU test both ways
# (the planner grids once, with the new chain). JSON and logs in $OUT, summary printed last.
#   P=<dir with bin/ from scripts/prebuild_mla_sm90.sh> OUT=<dir> bash scripts/gpu_mla_s4_chain.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true
B=$P/bin
ARGS=(--no-sweep --quick --T 8,128 --H 8,16,64 --prefill-T 4096 --prefill-H 64 --variants 5 --reps 9)
timeout 100 "$B/glm5rt_bench_sparse_mla" "${ARGS[@]}" --json "$OUT/chain_on.json" > "$OUT/bench_on.txt" 2>&1
on_rc=$?
GLM5RT_MLA_V5_CHAIN=0 timeout 100 "$B/glm5rt_bench_sparse_mla" "${ARGS[@]}" --json "$OUT/chain_off.json" > "$OUT/bench_off.txt" 2>&1
off_rc=$?
timeout 90 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" -tce="*planner choices*" > "$OUT/tests_on.txt" 2>&1
t_on=$?
GLM5RT_MLA_V5_CHAIN=0 timeout 90 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" -tce="*planner choices*" > "$OUT/tests_off.txt" 2>&1
t_off=$?
timeout 40 "$B/glm5rt_gpu_tests" -tc="*planner choices*" >> "$OUT/tests_on.txt" 2>&1
grid_rc=$?
for m in on off; do
  grep -E "kernel (5|0) " "$OUT/tests_$m.txt" | grep -E " bf16 " | grep -oE "rel L2 [0-9.e+-]+" | sort -k3 -g | tail -1 > "$OUT/worst_l2_$m.txt"
  grep -E "kernel (5|0) " "$OUT/tests_$m.txt" | grep -E " bf16 " | grep -oE "worst lse err [0-9.e+-]+" | sort -k4 -g | tail -1 > "$OUT/worst_lse_$m.txt"
  gzip -9 -f "$OUT/tests_$m.txt"
done
for m in on off; do
  echo "== bench, chain $m =="
  grep -E "^(decode|prefill)" "$OUT/bench_$m.txt"
  grep -E "WARNING|error" "$OUT/bench_$m.txt" | head -5
done
for m in on off; do
  echo "== tests, chain $m =="
  zcat "$OUT/tests_$m.txt.gz" | grep -E "ERROR|FAILED|test cases|assertions" | head -12
  echo "v5/auto bf16 worst rel L2: $(cat "$OUT/worst_l2_$m.txt"); worst LSE: $(cat "$OUT/worst_lse_$m.txt")"
done
rm -f "$OUT"/worst_*.txt
echo "exit codes: bench on $on_rc off $off_rc, tests on $t_on off $t_off, grids $grid_rc"

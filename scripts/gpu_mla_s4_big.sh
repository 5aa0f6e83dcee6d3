#!/usr/bin/env bash
# Sparse MLA session 4 ("mla-big") device call: kernel_variant 8 (32-token steps, one 8-warp group, records
# read from shared memory once per CTA) timed beside variant 5 and the automatic choice, bf16 records:
# T = 128 x H = 64 / 16 / 8 and prefill T = 1024 / 4096 x H = 64 (variant 8 also at forced 16 / 32 heads
# per CTA), then every sparse MLA GPU test (variant 8 in every loop) and the multi-pool test.
#   P=<dir with bin/ from scripts/prebuild_mla_sm90.sh> OUT=<dir> bash scripts/gpu_mla_s4_big.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
TAG=${TAG:-s4-big}
mkdir -p "$OUT"
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true
B=$P/bin
timeout 70 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats bf16 --T 128 --H 64,16,8 --prefill-T 1024,4096 \
  --prefill-H 64 --variants 5,8 --v8-hc 16,32 --reps 9 --commit "${COMMIT:-unknown}" \
  --json "$OUT/sparse_mla-$TAG.json" > "$OUT/bench.txt" 2>&1
bench_rc=$?
timeout 90 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" > "$OUT/tests.txt" 2>&1
test_rc=$?
grep -E "kernel 8 " "$OUT/tests.txt" | grep -oE "worst lse err [0-9.e+-]+" | sort -k4 -g | tail -1 > "$OUT/v8_worst_lse.txt"
grep -E "kernel 8 " "$OUT/tests.txt" | grep -oE "rel L2 [0-9.e+-]+" | sort -k3 -g | tail -1 > "$OUT/v8_worst_l2.txt"
grep -cE "kernel 8 " "$OUT/tests.txt" > "$OUT/v8_runs.txt"
gzip -9 -f "$OUT/tests.txt"
echo "== bench (bf16; v5 = round 3's kernel, v8 = 32-token steps) =="
grep -E "^decode|^prefill|v8 " "$OUT/bench.txt"
grep -E "WARNING|error|launch" "$OUT/bench.txt" | head -5
echo "== tests =="
zcat "$OUT/tests.txt.gz" | grep -E "ERROR|FAILED|test cases|assertions" | head -20
echo "variant 8 runs logged: $(cat "$OUT/v8_runs.txt"); worst LSE: $(cat "$OUT/v8_worst_lse.txt"); worst rel L2: $(cat "$OUT/v8_worst_l2.txt")"
echo "exit codes: bench $bench_rc, tests $test_rc"

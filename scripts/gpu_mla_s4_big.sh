#!/usr/bin/env bash
# Sparse MLA session 4 ("mla-big") device call 2: kernel_variant 8 in its default form (the row-ring kernel:
# variant 5 with 60 gathered records in flight instead of 48) timed beside variant 5 and the automatic choice,
# bf16 records, T = 128 x H = 64 / 16 / 8 and prefill 4096 x 64, with the ring kernel's diagnostics (no
# gather = compute only; no compute = gather only); the same at prefill 1024 x 64 from a 16K-token pool
# (19 MB, L2-resident) against the default 64K pool (75 MB); the 32-token form (GLM5RT_MLA_V8=32) at the
# same two prefill pools; then every sparse MLA GPU test with each form of variant 8.
# (Call 1 of the session ran the 32-token form as variant 8: bench/results/sparse_mla-h200-s4-big1.json.)
#   P=<dir with bin/ from scripts/prebuild_mla_sm90.sh> OUT=<dir> bash scripts/gpu_mla_s4_big.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true
B=$P/bin
C=${COMMIT:-unknown}
timeout 60 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats bf16 --T 128 --H 64,16,8 --prefill-T 4096 \
  --prefill-H 64 --variants 5,8 --v8-hc 16 --ring-diag --reps 9 --commit "$C" --json "$OUT/sparse_mla-s4-big2.json" > "$OUT/bench.txt" 2>&1
b1=$?
timeout 40 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats bf16 --T 128 --H 64 --prefill-T 1024 --prefill-H 64 \
  --variants 5,8 --ring-diag --pool 16384 --reps 9 --commit "$C" --json "$OUT/sparse_mla-s4-big2-pool16k.json" > "$OUT/bench_pool16k.txt" 2>&1
b2=$?
timeout 30 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats bf16 --T 128 --H 64 --prefill-T 1024 --prefill-H 64 \
  --variants 5,8 --reps 9 --commit "$C" --json "$OUT/pool64k-1024.json" > "$OUT/bench_pool64k.txt" 2>&1
echo "-- GLM5RT_MLA_V8=32 (32-token form as variant 8), 16K-token pool:" >> "$OUT/bench_pool64k.txt"
GLM5RT_MLA_V8=32 timeout 30 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats bf16 --T 128 --H 64 --prefill-T 1024 \
  --prefill-H 64 --variants 8 --pool 16384 --reps 9 --commit "$C" --json "$OUT/form32.json" >> "$OUT/bench_pool64k.txt" 2>&1
rm -f "$OUT/pool64k-1024.json" "$OUT/form32.json"  # at most 8 files come back; their rows are in bench_pool64k.txt
timeout 70 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" > "$OUT/tests.txt" 2>&1
t1=$?
GLM5RT_MLA_V8=32 timeout 70 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" > "$OUT/tests_form32.txt" 2>&1
t2=$?
for f in tests tests_form32; do
  echo "$f: variant 8 runs $(grep -cE "kernel 8 " "$OUT/$f.txt"), worst LSE $(grep -E "kernel 8 " "$OUT/$f.txt" | grep -oE "worst lse err [0-9.e+-]+" | sort -k4 -g | tail -1 | awk '{print $4}'), worst rel L2 $(grep -E "kernel 8 " "$OUT/$f.txt" | grep -oE "rel L2 [0-9.e+-]+" | sort -k3 -g | tail -1 | awk '{print $3}')" >> "$OUT/summary.txt"
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/$f.txt" | head -8 >> "$OUT/summary.txt"
  gzip -9 -f "$OUT/$f.txt"
done
echo "== bench (bf16, 64K pool; v5 = round 3's kernel, v8 = row ring) =="
grep -E "^decode|^prefill|ring diag|v8 " "$OUT/bench.txt"
echo "== 16K-token pool (L2-resident); then v5 / v8 on the 64K pool at prefill 1024; then the 32-token form on the 16K pool =="
grep -E "^decode|^prefill|ring diag|^--" "$OUT/bench_pool16k.txt" "$OUT/bench_pool64k.txt"
grep -E "WARNING|error|launch" "$OUT"/bench*.txt | head -5
echo "== tests =="
cat "$OUT/summary.txt"
echo "exit codes: bench $b1 $b2, tests $t1 $t2"

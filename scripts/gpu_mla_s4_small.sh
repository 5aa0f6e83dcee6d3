#!/usr/bin/env bash
# Sparse MLA session 4 (small T) device call. Call 1 (commit eb0c6df): the cluster merge (combine 4, since
# removed) against the partials + combine. Call 2 (commit 00140da, this script): bf16 partials (combine 5, the automatic chunked merge) against fp32 ones (2):
# a plan sweep at T = 1, 2, 4, 8 (every heads per CTA x split count, each with every distinct merge among
# automatic / 2 / 5; the automatic plan and round 4's beside them, same inputs), then the per-variant rows at
# T = 1, 8, 128 (H = 8, 16, 64, 128; automatic, v2, v5, v7; T = 128 also at forced 1-4 splits), then every
# sparse MLA GPU test (the planner grids last). JSON and logs in $OUT, summary last.
#   P=<dir with bin/ from scripts/prebuild_mla_sm90.sh> OUT=<dir> bash scripts/gpu_mla_s4_small.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true
B=$P/bin
COMMIT=${COMMIT:-unknown}
timeout 70 "$B/glm5rt_bench_sparse_mla" --plan-sweep --no-sweep --quick --T 1,2,4,8 --H 8,16,32,64,128 --reps 7 \
  --commit "$COMMIT" --json "$OUT/sparse_mla-h200-s4-small-plans.json" > "$OUT/bench_plans.txt" 2>&1
plan_rc=$?
timeout 60 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --T 1,8,128 --H 8,16,64,128 --variants 2,5,7 --force-splits 1,2,3,4 --reps 9 \
  --commit "$COMMIT" --json "$OUT/sparse_mla-h200-s4-small.json" > "$OUT/bench_rows.txt" 2>&1
rows_rc=$?
timeout 100 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" -tce="*planner choices*" > "$OUT/tests.txt" 2>&1
test_rc=$?
timeout 70 "$B/glm5rt_gpu_tests" -tc="*planner choices*" >> "$OUT/tests.txt" 2>&1
grid_rc=$?
for c in 2 5; do
  echo "merge $c: runs $(grep -cE "merge=$c:" "$OUT/tests.txt"), worst $(grep -E "merge=$c:" "$OUT/tests.txt" | grep -oE "rel L2 [0-9.e+-]+" | sort -k3 -g | tail -1), $(grep -E "merge=$c:" "$OUT/tests.txt" | grep -oE "worst row [0-9.e+-]+" | sort -k3 -g | tail -1), $(grep -E "merge=$c:" "$OUT/tests.txt" | grep -oE "worst lse err [0-9.e+-]+" | sort -k4 -g | tail -1)"
done > "$OUT/merge_precision.txt"
gzip -9 -f "$OUT/tests.txt"
echo "== plans (auto vs round 4 vs best swept; merge 2 = fp32 chunked, 3 fused, 5 bf16 chunked) =="
grep -E "^plan" "$OUT/bench_plans.txt" | sed -E 's/  +/ /g'
echo "== rows (auto, v2, v5, v7) =="
grep -E "^decode" "$OUT/bench_rows.txt" | sed -E 's/  +/ /g' | cut -c1-230
grep -E "forced" "$OUT/bench_rows.txt" | grep -E "H=8 " | sed -E 's/  +/ /g' 
grep -E "WARNING|error|launch during" "$OUT/bench_plans.txt" "$OUT/bench_rows.txt" | head -5
echo "== tests =="
zcat "$OUT/tests.txt.gz" | grep -E "ERROR|FAILED|test cases|assertions" | head -12
cat "$OUT/merge_precision.txt"
echo "exit codes: plans $plan_rc, rows $rows_rc, tests $test_rc, grids $grid_rc"

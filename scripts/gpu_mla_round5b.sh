#!/usr/bin/env bash
# Sparse MLA round 5, second device call: (1) the final planner (fitted constants + measured plans) timed
# against round 4's and every heads-per-CTA x split plan at T = 1, 2, 4, 8 (T = 2 and 4 were never swept:
# there the fitted model decides); (2) every kernel variant incl. the new variant 6 (FP8 records gathered by
# bulk copies) on the decode shapes; (3) every sparse MLA GPU test (variant 6 in every case; planner grids
# last); (4) the model fit to the new sweep. JSON and logs in $OUT, summary printed last.
#   P=<dir with bin/> OUT=<dir> bash scripts/gpu_mla_round5b.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true
B=$P/bin
timeout 150 "$B/glm5rt_bench_sparse_mla" --plan-sweep --no-sweep --quick --T 1,2,4,8 --H 8,16,32,64,128 --reps 9 \
  --json "$OUT/sparse_mla_plan2.json" > "$OUT/bench_plan.txt" 2>&1
plan_rc=$?
timeout 120 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --T 1,8,32,128 --H 8,16,64 --reps 9 \
  --json "$OUT/sparse_mla_variants.json" > "$OUT/bench_variants.txt" 2>&1
var_rc=$?
timeout 120 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" -tce="*planner choices*" > "$OUT/tests.txt" 2>&1
test_rc=$?
timeout 240 "$B/glm5rt_gpu_tests" -tc="*planner choices*" >> "$OUT/tests.txt" 2>&1
grid_rc=$?
grep -cE "rel L2" "$OUT/tests.txt" > "$OUT/test_runs_count.txt"
grep -E "round-5 plan" "$OUT/tests.txt" | sed 's/.*MESSAGE: //' | sort -u > "$OUT/test_plans.txt"
grep -E "kernel 6 " "$OUT/tests.txt" | grep -oE "worst lse err [0-9.e+-]+" | sort -k4 -g | tail -1 > "$OUT/v6_worst_lse.txt"
gzip -9 -f "$OUT/tests.txt"
echo "== fit to this sweep =="
python3 bench/sparse_mla/fit_plan.py --fit "$OUT/sparse_mla_plan2.json" 2>&1 | tail -24 | tee "$OUT/fit.txt"
echo "== variants (v6 = FP8 bulk) =="
grep -E "^decode" "$OUT/bench_variants.txt"
echo "== plan =="
grep -E "^plan " "$OUT/bench_plan.txt"
echo "== tests =="
zcat "$OUT/tests.txt.gz" | grep -E "ERROR|FAILED|test cases|assertions" | head -20
echo "runs checked: $(cat "$OUT/test_runs_count.txt"); variant 6 worst LSE: $(cat "$OUT/v6_worst_lse.txt")"
echo "exit codes: plan bench $plan_rc, variant bench $var_rc, tests $test_rc, grids $grid_rc"

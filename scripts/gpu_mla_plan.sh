#!/usr/bin/env bash
# Sparse MLA round 5 on the device: every sparse MLA GPU test (all kernel variants x merges, old paths too,
# and the planner grid: heads per CTA 8/16/32 x splits 1..128 at T = 1 and T = 8, both record formats,
# both planners; multi-pool cases), then the benchmark's plan sweep (T = 1 and 8: every heads per CTA x
# split count; T = 128 as a check that larger T is unchanged) with round 5's planner against round 4's on
# the same inputs, then the planner-model fit to the sweep. Everything lands in $OUT; summary printed last.
#
#   P=<dir with bin/glm5rt_gpu_tests, bin/glm5rt_bench_sparse_mla> OUT=<dir> bash scripts/gpu_mla_plan.sh
#   (without P, or when the prebuilt binaries do not start: builds with the kernels preset here)
# Flip back to round 4's planner without a rebuild: GLM5RT_MLA_PLANNER=1.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true
TEST_BIN=${P:-none}/bin/glm5rt_gpu_tests
BENCH_BIN=${P:-none}/bin/glm5rt_bench_sparse_mla
if ! "$TEST_BIN" -ltc >/dev/null 2>&1 || ! [ -x "$BENCH_BIN" ]; then
  echo "no usable prebuilt binaries: building (kernels preset, sm_90)"
  cmake --preset kernels -B build-kernels-gpu -DCMAKE_CUDA_ARCHITECTURES=90 2>&1 | tail -3
  cmake --build build-kernels-gpu -j"$(nproc)" --target glm5rt_gpu_tests glm5rt_bench_sparse_mla 2>&1 | tail -15
  TEST_BIN=build-kernels-gpu/tests/glm5rt_gpu_tests
  BENCH_BIN=build-kernels-gpu/bench/sparse_mla/glm5rt_bench_sparse_mla
fi
# The bench first (its numbers survive a test failure or a test timeout), then the tests.
timeout ${BENCH_TIMEOUT:-150} "$BENCH_BIN" --plan-sweep --no-sweep --quick --T 1,8,128 --H 8,16,32,64,128 --reps 9 \
  --json "$OUT/sparse_mla_plan.json" > "$OUT/bench.txt" 2>&1
bench_rc=$?
# Every case but the planner grids first (the old paths), then the grids (the long part), so a timeout in
# the grids still leaves the rest's verdict.
timeout 120 "$TEST_BIN" -tc="*sparse MLA*" -tce="*planner choices*" > "$OUT/tests.txt" 2>&1
test_rc=$?
timeout ${TEST_TIMEOUT:-300} "$TEST_BIN" -tc="*planner choices*" >> "$OUT/tests.txt" 2>&1
grid_rc=$?
grep -E "round-5 plan" "$OUT/tests.txt" | sed 's/.*MESSAGE: //' | sort -u > "$OUT/test_plans.txt"
grep -cE "rel L2" "$OUT/tests.txt" > "$OUT/test_runs_count.txt"
gzip -9 -f "$OUT/tests.txt"
echo "== planner fit to this sweep =="
python3 bench/sparse_mla/fit_plan.py --fit "$OUT/sparse_mla_plan.json" 2>&1 | tee "$OUT/fit.txt"
echo "== bench (plan lines) =="
grep -E "^(device|plan )" "$OUT/bench.txt"
echo "== tests =="
zcat "$OUT/tests.txt.gz" | grep -E "ERROR|FAILED|failed|test cases|assertions" | head -30
echo "runs checked: $(cat "$OUT/test_runs_count.txt")"
echo "bench exit code: $bench_rc; sparse MLA tests exit code: $test_rc (planner grids: $grid_rc)"

#!/usr/bin/env bash
# Indexer round 5 on the device, one call (about 4-5 minutes): build the indexer's tests and benchmark with
# nvcc directly (scripts/build_indexer_direct.sh, sm_90, -j16), ALL indexer GPU tests (every path: round-1
# row kernel, register selects of rounds 3 and 4, round 5's cluster select, split, fused), the pipeline
# tests again with GLM5RT_INDEXER_CLUSTER=0 (the automatic path = the previous default), compute-sanitizer
# memcheck (and a racecheck) of subcases that run the cluster select, the ptxas report of the changed
# kernels for sm_90 and sm_120, then bench_indexer --b1 (old = round-4 scores + register select, new =
# round-4 scores + cluster select, alternated at 8K, same process). JSON and logs into $OUT; summary last.
#
#   COMMIT=<hash> OUT=<dir> bash scripts/gpu_indexer_round5.sh        (device, carry .carry/idx)
#
# The flip back: GLM5RT_INDEXER_CLUSTER=0 in the environment, or return false in
# detail::cluster_select_default() (kernels/indexer/indexer_topk_cluster.cu).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
COMMIT=${COMMIT:-$(cat GIT_COMMIT 2>/dev/null || echo unknown)}
JSON=${JSON:-indexer-h200-round5.json}  # the second call of round 5 writes indexer-h200-round5b.json
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
failed=()
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
summary=()

step "machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader || true
nvcc --version | tail -1
echo "commit $COMMIT"

step "build (nvcc, indexer only, sm_90, -j16)"
bin=build-direct
scripts/build_indexer_direct.sh "$bin" 90 16 >"$OUT/build.txt" 2>&1 || failed+=(build)
grep -E "error|warning|spill|built" "$OUT/build.txt" | grep -v "0 bytes spill" | head -20

# ptxas report of the changed / new kernels, sm_90 and sm_120, in the background.
(
  for arch in 90 120; do
    for f in kernels/indexer/indexer_topk_cluster.cu kernels/indexer/indexer_topk_reg.cu; do
      echo "-- sm_$arch $f"
      nvcc -std=c++17 -O3 -I. -arch=sm_$arch --expt-relaxed-constexpr -Xptxas -v -c "$f" -o /dev/null 2>&1 |
        grep -E "registers|spill" | sed -E 's/ptxas info *: //'
    done
  done
) >"$OUT/ptxas.txt" 2>&1 &
ptxas_pid=$!

step "GPU tests: every indexer test case"
timeout 300 "$bin/test_indexer" -tc='*indexer*' >"$OUT/tests.txt" 2>&1 || failed+=(tests)
grep -E "ERROR|FAILED|failed|CHECK" "$OUT/tests.txt" | head -20
tail -3 "$OUT/tests.txt"
summary+=("tests (all indexer cases): $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/tests.txt" | tr '\n' ' ')")

step "GPU tests: pipeline with GLM5RT_INDEXER_CLUSTER=0 (automatic path = previous default)"
GLM5RT_INDEXER_CLUSTER=0 timeout 120 "$bin/test_indexer" -tc='*scores + top-k*' >"$OUT/tests_cluster0.txt" 2>&1 || failed+=(tests-cluster0)
tail -3 "$OUT/tests_cluster0.txt"
summary+=("tests (CLUSTER=0 pipeline): $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/tests_cluster0.txt" | tr '\n' ' ')")

step "benchmark: bench_indexer --b1 (old vs new in one process)"
timeout 240 "$bin/bench_indexer" "$OUT/$JSON" --b1 --commit "$COMMIT" \
  --command "COMMIT=<hash> OUT=<dir> bash scripts/gpu_indexer_round5.sh (bench_indexer OUT/$JSON --b1)" \
  >"$OUT/bench.txt" 2>&1 || failed+=(bench)

step "compute-sanitizer memcheck: selects incl. cluster (random page tables, page sizes 1-100, rows to 16K)"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/test_indexer" \
  -tc='*register select*' -sc='*random page tables*' >"$OUT/memcheck1.txt" 2>&1 || failed+=(memcheck-select)
tail -3 "$OUT/memcheck1.txt"
summary+=("memcheck selects (rk 1/2/3, page sizes): $(grep -E 'ERROR SUMMARY' "$OUT/memcheck1.txt" | tail -1)")

step "compute-sanitizer memcheck: scores + cluster select behind PDL, both formats"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/test_indexer" \
  -tc='*scores + top-k*' -sc='*scores + register select*' >"$OUT/memcheck2.txt" 2>&1 || failed+=(memcheck-pipeline)
tail -3 "$OUT/memcheck2.txt"
summary+=("memcheck scores + selects (PDL): $(grep -E 'ERROR SUMMARY' "$OUT/memcheck2.txt" | tail -1)")

step "compute-sanitizer racecheck: selects, other k (1, 100, 4096)"
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 3 "$bin/test_indexer" \
  -tc='*register select*' -sc='*other k*' >"$OUT/racecheck.txt" 2>&1 || failed+=(racecheck)
tail -3 "$OUT/racecheck.txt"
summary+=("racecheck selects (other k): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/racecheck.txt" | tail -1)")

step "Nsight Compute (if present and permitted): the register select at 8K (round 5's first call profiled the cluster select)"
if command -v ncu >/dev/null; then
  timeout 100 ncu -k regex:'topk_reg_kernel' -c 2 --section SpeedOfLight --section WarpStateStats --section InstructionStats \
    --section SchedulerStats --print-details all "$bin/bench_indexer" /tmp/ncu-bench.json --quick --b1 >"$OUT/ncu.txt" 2>&1 || true
  grep -E "topk_|Duration|Stall|Warp Cycles|Issued Warp|Executed Instructions|No Eligible|ERR" "$OUT/ncu.txt" | head -30
else
  echo "ncu not found"
fi
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass "$bin/obj/kernels_indexer_indexer_topk_cluster.cu.o" >"$OUT/cluster.sass" 2>&1 || true
  echo "cluster select SASS: $(grep -c '^ */\*[0-9a-f]\{4\}\*/' "$OUT/cluster.sass") instructions in all variants"
fi

wait "$ptxas_pid"
step "ptxas (sm_90, sm_120)"
cat "$OUT/ptxas.txt"

cat "$OUT/build.txt" "$OUT/tests.txt" "$OUT/tests_cluster0.txt" "$OUT/memcheck1.txt" "$OUT/memcheck2.txt" "$OUT/racecheck.txt" >"$OUT/logs.txt" 2>/dev/null
rm -f "$OUT/build.txt" "$OUT/tests.txt" "$OUT/tests_cluster0.txt" "$OUT/memcheck1.txt" "$OUT/memcheck2.txt" "$OUT/racecheck.txt"
step "benchmark output"
grep -v "^  \|^$" "$OUT/bench.txt" | grep -v "^summary\|^round 5 summary\|^new = " | head -40
step "SUMMARY"
for l in "${summary[@]}"; do echo "$l"; done
sed -n '/round 5 summary/,$p' "$OUT/bench.txt"
echo "failed steps: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]

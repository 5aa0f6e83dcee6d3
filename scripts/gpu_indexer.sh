#!/usr/bin/env bash
# One call on the GPU machine for the indexer kernels: build the indexer's tests and benchmark with nvcc
# directly (scripts/build_indexer_direct.sh: only the indexer's translation units, seconds instead of the
# whole kernels preset), run the GPU tests, a compute-sanitizer memcheck of the fused decode kernel, print
# ptxas's resource report for sm_120 and sm_90, run the benchmark and the PyTorch baseline, write JSON to
# $OUT, and print the summary table last. Keeps going past a failing step so that one call still collects
# every number; the exit code says whether anything failed.
# Usage: OUT=/some/dir scripts/gpu_indexer.sh   (GLM5RT_CUDA_ARCH, default 90: the architecture built)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out-indexer}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
main() {
failed=()
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true
nvcc --version | tail -1
commit=$(cat GIT_COMMIT 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)
echo "commit $commit"

# INDEXER_BIN: a folder with test_indexer and bench_indexer already built by build_indexer_direct.sh from
# the same sources with the same nvcc (saves the device the compile); otherwise they are built here.
bin=${INDEXER_BIN:-build-direct}
if [ -x "$bin/test_indexer" ] && [ -x "$bin/bench_indexer" ]; then
  step "prebuilt binaries in $bin (scripts/build_indexer_direct.sh, sm_90)"
  ls -l "$bin"
else
  step "build (nvcc, indexer only, sm_${GLM5RT_CUDA_ARCH:-90})"
  bin=build-direct
  scripts/build_indexer_direct.sh "$bin" "${GLM5RT_CUDA_ARCH:-90}" "$(nproc)" >"$OUT/build.txt" 2>&1 || failed+=(build)
  grep -E "error|warning|built" "$OUT/build.txt" | head -20
fi

# ptxas report for sm_120 and sm_90, compiled in the background while the tests run; printed later.
(
  for arch in 120 90; do
    for f in kernels/indexer/indexer_scores.cu kernels/indexer/indexer_topk.cu kernels/indexer/indexer_topk_reg.cu; do
      echo "-- sm_$arch $f"
      nvcc -std=c++17 -I. -arch=sm_$arch --expt-relaxed-constexpr -Xptxas -v -c "$f" -o /dev/null 2>&1 |
        grep -E "Compiling entry|registers|spill" | sed -E -e "s/'[^']*indexer_scores_kernelILNS1_9KeyFormatE([01])ELi([0-9]+)ELi([0-9]+)ELi([0-9]+)ELi([0-9]+)[^']*'/scores<fmt \1 (0 bf16, 1 fp8), \2 warps, \3 rows, sub \4, mode \5 (0 plain, 1 histogram, 2 fused)>/" -e "s/'[^']*(topk_[a-z_]*kernel)(ILi([0-9]))?[^']*'/\1 \3/"
    done
  done
) >"$OUT/ptxas.txt" 2>&1 &
ptxas_pid=$!

step "GPU tests"
if [ -x $bin/test_indexer ]; then
  timeout 120 $bin/test_indexer -tc='*indexer*' || failed+=(tests)
else
  failed+=(tests-missing)
fi

step "benchmark"
if [ -x $bin/bench_indexer ]; then
  timeout 150 $bin/bench_indexer "$OUT/bench_indexer.json" --commit "$commit" \
    --command "OUT=\$OUT scripts/gpu_indexer.sh (bench_indexer, CUDA graphs, median of 15 replays)" || failed+=(bench)
fi
# A first summary (without the baseline) so that a cut-short call still leaves the merged JSON.
[ -f "$OUT/bench_indexer.json" ] && python3 bench/indexer/summarize.py "$OUT/bench_indexer.json" /nonexistent "$OUT/indexer-h200.json" >/dev/null

step "compute-sanitizer memcheck (fused decode kernel: an 8K row and all-equal rows, both formats)"
if [ -x $bin/test_indexer ] && command -v compute-sanitizer >/dev/null; then
  timeout 45 compute-sanitizer --tool memcheck --error-exitcode 3 $bin/test_indexer \
    -tc='*scores + top-k*' -sc='*fused kernel at 8K*' 2>&1 | tail -4 || failed+=(memcheck)
fi

step "compute-sanitizer memcheck (register select: rows up to 16K, ties, page sizes)"
if [ -x $bin/test_indexer ] && command -v compute-sanitizer >/dev/null; then
  timeout 45 compute-sanitizer --tool memcheck --error-exitcode 3 $bin/test_indexer \
    -tc='*register select*' -sc='*random page tables*' 2>&1 | tail -4 || failed+=(memcheck-reg)
fi

step "ptxas resource report (registers, spills, shared memory)"
wait "$ptxas_pid"
cat "$OUT/ptxas.txt"

step "PyTorch baseline"
PYTHONUNBUFFERED=1 timeout "${TORCH_TIMEOUT:-40}" python3 bench/indexer/torch_baseline.py "$OUT/torch_baseline.json" || failed+=(torch)

step "summary"
if [ -f "$OUT/bench_indexer.json" ]; then
  python3 bench/indexer/summarize.py "$OUT/bench_indexer.json" "$OUT/torch_baseline.json" "$OUT/indexer-h200.json" || failed+=(summary)
fi
echo
if [ ${#failed[@]} -gt 0 ]; then echo "FAILED steps: ${failed[*]}"; return 1; fi
echo "all steps passed"
}

main 2>&1 | tee "$OUT/log"
exit "${PIPESTATUS[0]}"

#!/usr/bin/env bash
# One call on the GPU machine for the indexer kernels: configure the `kernels` preset, build, run the GPU
# tests, print ptxas's resource report for sm_120 (and sm_90), run the benchmark and the PyTorch baseline,
# write JSON to $OUT, and print the summary table last. Keeps going past a failing step so that one
# call still collects every number; the exit code says whether anything failed.
# Usage: OUT=/some/dir scripts/gpu_indexer.sh   (GLM5RT_CUDA_ARCHS, default 90: the architectures built)
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

step "configure + build (kernels preset)"
archs=${GLM5RT_CUDA_ARCHS:-90}
configure() { cmake --preset kernels -DCMAKE_CUDA_ARCHITECTURES="$archs" "$@" >"$OUT/configure.txt" 2>&1; }
if ! configure; then
  # doctest may be missing on the machine: a copy of the Debian package's files can travel in .deps/
  echo "configure failed; retrying with .deps/doctest-prefix"; tail -5 "$OUT/configure.txt"
  configure -DCMAKE_PREFIX_PATH="$PWD/.deps/doctest-prefix" || { tail -20 "$OUT/configure.txt"; failed+=(configure); }
fi
cmake --build build-kernels -j "$(nproc)" --target glm5rt_gpu_tests bench_indexer 2>&1 | tail -15 || failed+=(build)
[ -x build-kernels/tests/glm5rt_gpu_tests ] || failed+=(build-tests)
[ -x build-kernels/bench/indexer/bench_indexer ] || failed+=(build-bench)

# ptxas report for sm_120 and sm_90, compiled in the background while the tests run; printed later.
(
  for arch in 120 90; do
    for f in kernels/indexer/indexer_scores.cu kernels/indexer/indexer_topk.cu; do
      echo "-- sm_$arch $f"
      nvcc -std=c++17 -I. -arch=sm_$arch --expt-relaxed-constexpr -Xptxas -v -c "$f" -o /dev/null 2>&1 |
        grep -E "Compiling entry|registers|spill" | sed -E -e "s/'[^']*indexer_scores_kernelILNS1_9KeyFormatE0ELi([0-9]+)ELi([0-9]+)[^']*'/scores<bf16, \1 warps, \2 rows>/" -e "s/'[^']*indexer_scores_kernelILNS1_9KeyFormatE1ELi([0-9]+)ELi([0-9]+)[^']*'/scores<fp8, \1 warps, \2 rows>/" -e "s/'[^']*indexer_topk_kernel[^']*'/topk/"
    done
  done
) >"$OUT/ptxas.txt" 2>&1 &
ptxas_pid=$!

step "GPU tests"
if [ -x build-kernels/tests/glm5rt_gpu_tests ]; then
  timeout 45 build-kernels/tests/glm5rt_gpu_tests -tc='*indexer*' || failed+=(tests)
fi

step "benchmark"
if [ -x build-kernels/bench/indexer/bench_indexer ]; then
  timeout 60 build-kernels/bench/indexer/bench_indexer "$OUT/bench_indexer.json" --commit "$commit" \
    --command "OUT=\$OUT scripts/gpu_indexer.sh (bench_indexer, CUDA graphs, median of 15 replays)" || failed+=(bench)
fi

step "compute-sanitizer memcheck (top-k, both paths, one subcase)"
if [ -x build-kernels/tests/glm5rt_gpu_tests ] && command -v compute-sanitizer >/dev/null; then
  timeout 30 compute-sanitizer --tool memcheck --error-exitcode 3 build-kernels/tests/glm5rt_gpu_tests \
    -tc='*top-k equals*' -sc='*random rows*' 2>&1 | tail -4 || failed+=(memcheck)
fi

step "ptxas resource report (registers, spills, shared memory)"
wait "$ptxas_pid"
cat "$OUT/ptxas.txt"

step "PyTorch baseline"
PYTHONUNBUFFERED=1 timeout 40 python3 bench/indexer/torch_baseline.py "$OUT/torch_baseline.json" || failed+=(torch)

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

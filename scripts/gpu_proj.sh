#!/usr/bin/env bash
# Dense FP8 attention projections on the device, one call: this family's GPU tests (every fp8_gemm test
# case, the grouped-projection cases, the CUDA backend's "cuda fast moe" cases that compare whole forwards
# with the CPU, both with and without grouped projections), then glm5rt_bench_proj (per-shape split sweep
# and one layer's projections, separate vs grouped) and, where the full build exists, glm5rt-bench with
# the grouped projections off and on in one process. JSON and logs into $OUT; summary last.
#   P=<build dir with tests/glm5rt_gpu_tests, bench/gemm/glm5rt_bench_proj[, bench/forward/glm5rt-bench]> \
#   OUT=/tmp/out scripts/gpu_proj.sh
# Without P: configures the `kernels` preset for sm_90 and builds the test and bench targets (-j nproc).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out-proj}
mkdir -p "$OUT"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
commit=${GLM5RT_COMMIT:-$(cat COMMIT 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)}
bin=${P:-}
if [ -z "$bin" ]; then
  cmake --preset kernels -DCMAKE_CUDA_ARCHITECTURES="${GLM5RT_ARCHS:-90}" >"$OUT/configure.txt" 2>&1 &&
    cmake --build build-kernels -j "$(nproc)" --target glm5rt_gpu_tests glm5rt_bench_proj >"$OUT/build.txt" 2>&1 &&
    bin=build-kernels || { echo "== BUILD FAILED"; tail -n 30 "$OUT/build.txt"; exit 1; }
fi
"$bin/tests/glm5rt_gpu_tests" -tc="fp8 gemm*,fp8 quantize*,cuda fast moe*" >"$OUT/tests.txt" 2>&1
echo "== gpu tests exit $?"
"$bin/bench/gemm/glm5rt_bench_proj" --quick --reps 9 --commit "$commit" --json "$OUT/proj-h200.json" >"$OUT/bench_proj.txt" 2>&1
echo "== glm5rt_bench_proj exit $?"
if [ -x "$bin/bench/forward/glm5rt-bench" ]; then
  "$bin/bench/forward/glm5rt-bench" --glm5-dims --layers 4 --dense-layers 1 --batches 1,32 --contexts 8192 \
    --prefill 0 --steps 10 --stages --variants fast:auto:nogroup,fast:auto:group,fast:auto:groupearly \
    --json "$OUT/forward-proj-h200.json" >"$OUT/forward.txt" 2>&1
  echo "== glm5rt-bench exit $?"
fi
grep -E "^\[doctest\] (test cases|assertions):|FAILED|ERROR" "$OUT/tests.txt" | head -n 20
grep -E "^device:|^copy bandwidth" "$OUT/bench_proj.txt"
grep -E "backend|split strided" "$OUT/bench_proj.txt" | awk '$2 == 1' | head -n 40
sed -n '/^One layer/,$p' "$OUT/bench_proj.txt"
[ -f "$OUT/forward.txt" ] && grep -E "grouped attention projections|decode batch|stages" "$OUT/forward.txt"
exit 0

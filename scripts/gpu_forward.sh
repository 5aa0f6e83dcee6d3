#!/usr/bin/env bash
# The CUDA forward on the accelerator machine, in one call: build (sm_90), the sm_120 resource report and
# SASS check of the backend's kernels/common kernels, the GPU tests (kernels alone + CPU-vs-GPU on every
# fixture + the fast attention kernels against the simple ones and the CPU: test_cuda_fast_kernels.cpp),
# and glm5rt-bench at GLM-5 dimensions (fast kernels, then decode with GLM5RT_CUDA_KERNELS=simple for
# comparison). Logs and JSON go to $OUT; a summary is printed last.
#
#   bash scripts/gpu_forward.sh            (from the repository root, or a copy of it under .carry/<name>)
#
# Dependencies missing on that machine (mimalloc / PCRE2 / ICU dev packages) come from .carry/debs.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
JOBS=${JOBS:-16}
t_start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t_start ))s] $*"; }

# A copy under .carry/<name> may come without the fixtures and the demo model: use the checkout's own.
for d in tests/data models; do
  if [ ! -e "$d" ] && [ -e "../../$d" ]; then ln -s "$ROOT/../../$d" "$d"; fi
done
for env in .carry/debs/env.sh ../debs/env.sh; do
  if [ -f "$env" ]; then source "$env"; break; fi
done
COMMIT=$(cat COMMIT 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv > "$OUT/device.txt" 2>&1
stamp "configure + build (sm_90)"
{
  cmake --preset default -B build-gpu -DCMAKE_CUDA_ARCHITECTURES=90 -DGLM5RT_BUILD_EXAMPLES=OFF &&
  cmake --build build-gpu -j"$JOBS" --target glm5rt_gpu_tests glm5rt-bench
} > "$OUT/build.log" 2>&1
build_rc=$?
stamp "build rc=$build_rc"

# sm_120: resource report (registers, shared memory, spills) and SASS instruction check of the kernels.
(
  mkdir -p build-sm120
  for f in kernels/common/*.cu; do
    o=build-sm120/$(basename "$f" .cu).o
    echo "== $f"
    nvcc -std=c++17 -I. --expt-relaxed-constexpr -arch=sm_120 -Xptxas -v -c "$f" -o "$o" 2>&1
    echo "HGMMA: $(cuobjdump --dump-sass "$o" | grep -c HGMMA)  HMMA: $(cuobjdump --dump-sass "$o" | grep -c HMMA)"
  done
) > "$OUT/sm120.log" 2>&1 &
sm120_pid=$!

tests_rc=-1
if [ $build_rc -eq 0 ]; then
  stamp "gpu tests"
  (cd build-gpu && timeout 260 ctest -L gpu -V --timeout 180) > "$OUT/gpu_tests.log" 2>&1
  tests_rc=$?
  stamp "gpu tests rc=$tests_rc"
  stamp "bench"
  timeout 90 build-gpu/bench/forward/glm5rt-bench --glm5-dims --layers 4 --dense-layers 1 --batches 1,32 \
    --context 8192 --prefill 4096 --steps 10 --commit "$COMMIT" --json "$OUT/forward-h200.json" > "$OUT/bench.log" 2>&1
  bench_rc=$?
  timeout 40 build-gpu/bench/forward/glm5rt-bench --glm5-dims --layers 4 --dense-layers 1 --batches 1,32 \
    --context 8192 --prefill 0 --steps 10 --fp8-path direct --commit "$COMMIT" \
    --json "$OUT/forward-h200-direct.json" >> "$OUT/bench.log" 2>&1
  stamp "bench rc=$bench_rc"
  if [ $(( $(date +%s) - t_start )) -lt 450 ]; then
    stamp "bench, simple kernels (decode only)"
    echo "== GLM5RT_CUDA_KERNELS=simple" >> "$OUT/bench.log"
    GLM5RT_CUDA_KERNELS=simple timeout 40 build-gpu/bench/forward/glm5rt-bench --glm5-dims --layers 4 --dense-layers 1 \
      --batches 1,32 --context 8192 --prefill 0 --steps 10 --commit "$COMMIT" \
      --json "$OUT/forward-h200-simple-kernels.json" >> "$OUT/bench.log" 2>&1
  fi
fi
wait $sm120_pid

{
  echo "== summary ($(cat "$OUT/device.txt" | tail -1)), commit $COMMIT"
  echo "build rc=$build_rc tests rc=$tests_rc"
  grep -E "\[(logits|greedy|topk|route|hidden|fast-logits|fast-topk|fast-records|fast-decode|fast-graph)\]|rel error|tests passed|tests failed|Failed|FAILED|ERROR" "$OUT/gpu_tests.log" 2>/dev/null | head -260
  grep -E "HGMMA|registers|spill|smem" "$OUT/sm120.log" | sort | uniq -c | sort -rn | head -30
  cat "$OUT/bench.log" 2>/dev/null
  tail -30 "$OUT/build.log" | grep -iE "error" | head -10
} | tee "$OUT/summary.txt"

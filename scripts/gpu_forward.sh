#!/usr/bin/env bash
# The CUDA forward on the accelerator machine, in one call: the GPU tests (the fast MoE / FP8 GEMM paths
# first: test_cuda_fast_moe.cpp, then the backend's other tests, then every other GPU test while time is
# left) and glm5rt-bench at GLM-5 dimensions: the default kernels (also without split-K) beside the earlier configuration (fast
# attention, simple MoE, FP8 dequantised + cuBLASLt) and the FP8 path alternatives on one 4-layer model,
# contexts 8K and 32K, stage times; then a 2-layer run whose difference from the 4-layer run gives one
# whole layer (bench/forward/layer_json.py). JSON and logs go to $OUT; a summary is printed last.
#
#   bash scripts/gpu_forward.sh            (from the repository root, or a copy of it under .carry/<name>)
#   GLM5RT_PREBUILT=prebuilt GLM5RT_PREBUILT_SOURCE_DIR=/path/of/the/build/tree/source bash scripts/gpu_forward.sh
#     uses glm5rt_gpu_tests and glm5rt-bench built elsewhere for sm_90 (no build on the device; the
#     folder, or prebuilt.tar.xz with the binaries and a lib/ of runtime libraries); their compiled-in
#     test data path (<source>/tests/data) is made to resolve here by a link to this tree.
#   BUDGET=220 sets the seconds the whole script may take (later steps are skipped or cut short).
#
# Dependencies missing on that machine (mimalloc / PCRE2 / ICU packages) come from .carry/debs.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
JOBS=${JOBS:-16}
BUDGET=${BUDGET:-400}
t_start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t_start ))s] $*"; }
left() { echo $(( BUDGET - ($(date +%s) - t_start) )); }

# A copy under .carry/<name> may come without the fixtures and the demo model: use the checkout's own.
for d in tests/data models; do
  if [ ! -e "$d" ] && [ -e "../../$d" ]; then ln -s "$ROOT/../../$d" "$d"; fi
done
for env in .carry/debs/env.sh ../debs/env.sh; do
  if [ -f "$env" ]; then source "$env"; break; fi
done
COMMIT=$(cat COMMIT 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)
LOG=$OUT/run.log
: > "$LOG"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv >> "$LOG" 2>&1

TESTS= BENCH= build_rc=-1
# A prebuilt bundle may come as $GLM5RT_PREBUILT.tar.xz (binaries + the runtime libraries the machine
# lacks under lib/), to stay inside the carry size limit.
if [ -n "${GLM5RT_PREBUILT:-}" ] && [ ! -d "$GLM5RT_PREBUILT" ] && [ -f "$GLM5RT_PREBUILT.tar.xz" ]; then
  tar -xJf "$GLM5RT_PREBUILT.tar.xz"
fi
if [ -n "${GLM5RT_PREBUILT:-}" ] && [ -d "$GLM5RT_PREBUILT/lib" ]; then
  export LD_LIBRARY_PATH=$ROOT/$GLM5RT_PREBUILT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
if [ -n "${GLM5RT_PREBUILT:-}" ] && [ -x "$GLM5RT_PREBUILT/glm5rt_gpu_tests" ]; then
  src=${GLM5RT_PREBUILT_SOURCE_DIR:-}
  if [ -n "$src" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -sfn "$ROOT" "$src"; fi
  if "$GLM5RT_PREBUILT/glm5rt_gpu_tests" --list-test-cases > /dev/null 2>> "$LOG"; then
    TESTS=$GLM5RT_PREBUILT/glm5rt_gpu_tests
    BENCH=$GLM5RT_PREBUILT/glm5rt-bench
    build_rc=prebuilt
  else
    stamp "prebuilt binaries do not run here: building" >> "$LOG"
  fi
fi
if [ -z "$TESTS" ]; then
  stamp "configure + build (sm_90)"
  {
    cmake --preset default -B build-gpu -DCMAKE_CUDA_ARCHITECTURES=90 -DGLM5RT_BUILD_EXAMPLES=OFF &&
    cmake --build build-gpu -j"$JOBS" --target glm5rt_gpu_tests glm5rt-bench
  } > "$OUT/build.log" 2>&1
  build_rc=$?
  TESTS=build-gpu/tests/glm5rt_gpu_tests
  BENCH=build-gpu/bench/forward/glm5rt-bench
fi
stamp "binaries: $build_rc"

tests_rc=- bench_rc=- layer_rc=- rest_rc=-
if [ -x "$TESTS" ]; then
  stamp "gpu tests: fast MoE / FP8 GEMM paths"
  timeout 90 "$TESTS" -tc="cuda fast moe*,moe_forward with caller routing*" > "$OUT/gpu_tests.log" 2>&1
  tests_rc=$?
  stamp "gpu tests rc=$tests_rc"
fi
if [ -x "$BENCH" ]; then
  stamp "bench: 4 layers, variants"
  timeout $(( $(left) > 100 ? 100 : $(left) )) "$BENCH" --glm5-dims --layers 4 --dense-layers 1 --batches 1,32 \
    --contexts 8192,32768 --prefill 4096 --steps 10 --stages \
    --variants fast:auto,fast:auto:nosplit,fast-attn:dequant,fast:dequant --commit "$COMMIT" \
    --json "$OUT/forward-h200.json" > "$OUT/bench.log" 2>&1
  bench_rc=$?
  stamp "bench rc=$bench_rc"
  if [ "$(left)" -gt 30 ]; then
    stamp "bench: 2 layers (one layer by difference)"
    timeout $(( $(left) > 45 ? 45 : $(left) )) "$BENCH" --glm5-dims --layers 2 --dense-layers 1 --batches 1,32 \
      --contexts 8192,32768 --prefill 0 --steps 10 --stages --commit "$COMMIT" \
      --json "$OUT/forward-h200-2layers.json" >> "$OUT/bench.log" 2>&1
    layer_rc=$?
    python3 bench/forward/layer_json.py "$OUT/forward-h200.json" "$OUT/forward-h200-2layers.json" \
      "$OUT/layer-h200.json" >> "$OUT/bench.log" 2>&1
    stamp "layer rc=$layer_rc"
  fi
fi
if [ -x "$TESTS" ] && [ "$(left)" -gt 20 ]; then
  stamp "gpu tests: the backend's other tests, then the rest ($(left) s left)"
  first="cuda fast kernels*,cuda forward*,cuda sessions*,cuda backend*,MoE block*,router*,permutation*,fp8*"
  timeout $(( $(left) - 10 )) "$TESTS" -tc="$first" >> "$OUT/gpu_tests.log" 2>&1
  rest_rc=$?
  if [ "$(left)" -gt 20 ]; then
    timeout $(( $(left) - 10 )) "$TESTS" -tce="cuda fast moe*,moe_forward with caller routing*,$first" >> "$OUT/gpu_tests.log" 2>&1
    rest_rc="$rest_rc,$?"
  fi
  stamp "other tests rc=$rest_rc"
fi

{
  echo "== summary ($(sed -n 2p "$LOG")), commit $COMMIT, $(( $(date +%s) - t_start )) s"
  echo "binaries: $build_rc; fast-moe tests rc=$tests_rc; bench rc=$bench_rc; layer rc=$layer_rc; other tests rc=$rest_rc"
  grep -E "^\[(moe-[a-z]+|fast-[a-z]+|logits|greedy)\]|test cases:|ERROR|FAILED|fatal|error" "$OUT/gpu_tests.log" 2>/dev/null |
    cut -c1-230 | head -120
  grep -vE "^\s*$" "$OUT/bench.log" 2>/dev/null | head -120
  [ -f "$OUT/build.log" ] && grep -iE "error" "$OUT/build.log" | head -10
  cat "$LOG"
} | tee "$OUT/summary.txt"

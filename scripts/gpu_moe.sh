#!/usr/bin/env bash
# MoE and FP8 GEMM on a GPU machine, in one go: configure the `kernels` preset and build (or use binaries
# already built for this machine: GLM5RT_PREBUILT=<build dir>), run the GPU tests (continuing past
# failures), print the ptxas resource report for sm_120, run the benchmark, write JSON and logs to $OUT,
# and print the summary table last.
#   OUT=/tmp/out scripts/gpu_moe.sh                 # everything
#   GLM5RT_ARCHS="80;90;120" scripts/gpu_moe.sh     # build architectures (default 90: the H200)
#   GLM5RT_BENCH_TOKENS=1,8 scripts/gpu_moe.sh      # token counts of the benchmark (quick check: 1,8)
#   GLM5RT_SKIP_PTXAS=1 scripts/gpu_moe.sh          # no sm_120 ptxas / SASS report (saves device time)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out-moe}
mkdir -p "$OUT"
exec > >(tee "$OUT/log") 2>&1
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
commit=${GLM5RT_COMMIT:-$(cat COMMIT 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)}
echo "== gpu_moe.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $commit"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>/dev/null || true

# ---- build (or reuse) ----
bin=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
if [ -n "${GLM5RT_PREBUILT:-}" ] && "${GLM5RT_PREBUILT}/tests/glm5rt_gpu_tests" --list-test-cases >/dev/null 2>&1 &&
   [ -x "${GLM5RT_PREBUILT}/bench/moe/glm5rt_bench_moe" ] &&
   ! grep -q "not found" <<<"$(ldd "${GLM5RT_PREBUILT}/bench/moe/glm5rt_bench_moe")"; then
  bin=$GLM5RT_PREBUILT
  echo "== using prebuilt binaries in $bin"
else
  [ -n "${GLM5RT_PREBUILT:-}" ] && echo "== prebuilt binaries in $GLM5RT_PREBUILT do not run here; building"
  t0=$(date +%s)
  if cmake --preset kernels -DCMAKE_CUDA_ARCHITECTURES="${GLM5RT_ARCHS:-90}" >"$OUT/configure.txt" 2>&1 &&
     cmake --build build-kernels -j "$(nproc)" --target glm5rt_gpu_tests glm5rt_bench_moe >"$OUT/build.txt" 2>&1; then
    bin=build-kernels
    echo "== built in $(( $(date +%s) - t0 )) s"
  else
    echo "== BUILD FAILED"; tail -n 40 "$OUT/build.txt" "$OUT/configure.txt"
  fi
fi

# ---- ptxas report for sm_120 (resource use of the portable kernels on the primary target), in background ----
(
  [ -n "${GLM5RT_SKIP_PTXAS:-}" ] && exit 0
  for f in kernels/gemm/*.cu kernels/moe/*.cu; do
    nvcc -std=c++17 -O3 -I. --expt-relaxed-constexpr -arch=sm_120 -Xptxas -v -c "$f" -o /dev/null 2>&1 |
      grep -E "Compiling entry|registers|spill|error" | sed -e "s|^|$(basename "$f"): |"
  done >"$OUT/ptxas_sm120.txt"
  # Which tensor-core instructions the FP8 GEMM became: native QMMA expected on sm_120; sm_90 has no
  # FP8 mma.sync, so there it must be HMMA (after conversions); HGMMA (wgmma) must appear nowhere.
  if command -v cuobjdump >/dev/null; then
    for a in 120 90; do
      nvcc -std=c++17 -O3 -I. --expt-relaxed-constexpr -cubin -arch=sm_$a kernels/gemm/fp8_gemm.cu -o /tmp/fp8_gemm_sm$a.cubin &&
        echo "sm_$a: $(cuobjdump -sass /tmp/fp8_gemm_sm$a.cubin | grep -oE '(HGMMA|QGMMA|QMMA|HMMA|F2FP|I2F|F2F)[.A-Z0-9_]*' | sort | uniq -c | tr -s ' \n' ' ')"
    done >"$OUT/sass_summary.txt" 2>&1
  fi
) &
ptxas_pid=$!

# ---- tests ----
tests_rc=-1
if [ -n "$bin" ]; then
  # Only this family's test cases (the GPU suite holds every kernel family's tests).
  timeout "${GLM5RT_TEST_TIMEOUT:-110}" "$bin/tests/glm5rt_gpu_tests" --duration=true \
    -tc="${GLM5RT_TEST_FILTER:-*fp8*,*router*,*permutation*,*MoE*}" 2>&1 | tee "$OUT/tests.txt"
  tests_rc=${PIPESTATUS[0]}
  echo "== gpu tests exit code $tests_rc"
fi

# ---- benchmark ----
bench_rc=-1
if [ -n "$bin" ]; then
  "$bin/bench/moe/glm5rt_bench_moe" --json "$OUT/moe-h200.json" --commit "$commit" \
    --tokens "${GLM5RT_BENCH_TOKENS:-1,8,64,512,4096}" 2>&1 | tee "$OUT/bench.txt"
  bench_rc=${PIPESTATUS[0]}
  echo "== benchmark exit code $bench_rc"
fi

wait "$ptxas_pid"
echo "== ptxas -v, sm_120 (registers / spills per kernel)"
awk '/Compiling entry/ { match($0, /function .*/); name = substr($0, RSTART + 10, 90) }
     /spill/ { spill = $0; sub(/.*: +/, "", spill) }
     /Used [0-9]+ registers/ { regs = $0; sub(/.*Used/, "Used", regs); printf "%-90s %s | %s\n", name, regs, spill }' \
  "$OUT/ptxas_sm120.txt" 2>/dev/null

echo "== SASS tensor-core instructions in fp8_gemm.cu (count per opcode)"
cat "$OUT/sass_summary.txt" 2>/dev/null
echo "== summary"
grep -E "test cases:|assertions:" "$OUT/tests.txt" 2>/dev/null | tail -n 2
echo "tests rc=$tests_rc bench rc=$bench_rc"
sed -n '/^GLM-5 MoE layer/,$p' "$OUT/bench.txt" 2>/dev/null

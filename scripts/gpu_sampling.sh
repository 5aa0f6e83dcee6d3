#!/usr/bin/env bash
# The device sampler on the accelerator machine, in one call: build (default preset, sm_90), the sampler's
# GPU tests first (kernels/sampling against engine/sampler.cpp, round 1 and round 2 on every draw; CUDA
# sessions with device-resident logits, round 2 then round 1), its benchmark (bench/sampling, both
# kernels -> JSON), the sm_120 resource report of kernels/sampling, then
# the rest of the GPU suite (ctest -L gpu, less the sampler tests already run) in the time left. Logs
# and JSON go to $OUT; a summary is printed last.
#
#   COMMIT=<hash> bash scripts/gpu_sampling.sh      (repository root, or a copy under .carry/<name>)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
JOBS=${JOBS:-16}
DEADLINE=${DEADLINE:-600}  # seconds from the start by which the suite is stopped (its log still comes back)
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
for env in .carry/debs/env.sh ../debs/env.sh; do
  if [ -f "$env" ]; then source "$env"; break; fi
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/device.txt" 2>&1

# sm_120: registers, shared memory and spills of the sampler's kernels (in the background).
(
  for f in sampling_v1 sampling_v2 sampling_topk; do
    echo "kernels/sampling/$f.cu (sm_120):"
    nvcc -std=c++17 -O3 -I. --expt-relaxed-constexpr -arch=sm_120 -Xptxas -v -c kernels/sampling/$f.cu \
      -o /tmp/${f}_sm120.o 2>&1 | grep -E "Used|spill|error" | sed 's/^ptxas info *: //'
    # 64-bit shared atomics as compare-and-swap loops (round 1's contention, by hypothesis): v2 should have none
    # outside its fallback.
    echo "  SASS: $(cuobjdump --dump-sass /tmp/${f}_sm120.o 2>/dev/null | grep -c 'ATOMS.*CAS') ATOMS.CAS, $(cuobjdump --dump-sass /tmp/${f}_sm120.o 2>/dev/null | grep -c 'ATOMS') ATOMS"
  done
) > "$OUT/sm120.log" 2>&1 &
sm120=$!

stamp "build (sm_90)"
{ cmake --preset default -B build-gpu -DCMAKE_CUDA_ARCHITECTURES=90 -DGLM5RT_BUILD_EXAMPLES=OFF \
    -DGLM5RT_BUILD_BENCH=ON && cmake --build build-gpu -j"$JOBS" --target glm5rt_gpu_tests bench_sampling; } > "$OUT/build.log" 2>&1
build_rc=$?
stamp "build rc=$build_rc"
own_rc=-1 bench_rc=-1 suite_rc=-1
if [ $build_rc -eq 0 ]; then
  # Both kernels on every draw (the kernel tests set SampleParams::kernel); the session tests run the
  # default (round 2), then again with round 1 through the environment.
  (cd build-gpu/tests && timeout 120 ./glm5rt_gpu_tests -tc="device sampler*,cuda device sampling*"; a=$?
    echo "== the CUDA session tests again with GLM5RT_SAMPLING_KERNEL=v1"
    GLM5RT_SAMPLING_KERNEL=v1 timeout 60 ./glm5rt_gpu_tests -tc="cuda device sampling*"; b=$?
    echo "== sampler tests rc: both kernels $a, sessions with v1 $b"; [ $a -eq 0 ] && [ $b -eq 0 ]) \
    > "$OUT/sampling_tests.log" 2>&1
  own_rc=$?
  stamp "sampler tests rc=$own_rc"
  timeout 60 build-gpu/bench/sampling/bench_sampling --iters 20 --commit "${COMMIT:-unknown}" \
    --json "$OUT/sampling-h200.json" > "$OUT/bench_sampling.log" 2>&1
  bench_rc=$?
  stamp "bench rc=$bench_rc"
  left=$(( DEADLINE - ($(date +%s) - t0) )); [ $left -lt 10 ] && left=10
  (cd build-gpu && timeout "$left" ctest -L gpu -E "device sampl" -j4 --timeout 240 -V) > "$OUT/gpu_tests.log" 2>&1
  suite_rc=$?
  stamp "gpu suite rc=$suite_rc"
fi
wait $sm120
{
  echo "== $(cat "$OUT/device.txt"), commit ${COMMIT:-unknown}"
  echo "build rc=$build_rc, sampler tests rc=$own_rc, bench rc=$bench_rc, gpu suite rc=$suite_rc"
  for k in v1 v2; do
    echo "kernel $k: $(grep -c "^\[sampler $k\]" "$OUT/sampling_tests.log") parameter sets, $(grep "^\[sampler $k\]" "$OUT/sampling_tests.log" | awk 'match($0, /[0-9]+\/[0-9]+ draws/) {split(substr($0, RSTART, RLENGTH - 6), a, "/"); if (a[1] != a[2]) bad++} END {print bad + 0}') with a draw unlike sample_token"
  done
  grep -E "^\[sampler-v|^\[device-sampling\]|^== |test cases:|assertions:|ERROR|error:" "$OUT/sampling_tests.log" | cut -c1-200 | head -60
  grep -E "^\[sampler" "$OUT/sampling_tests.log" | awk 'match($0, /[0-9]+\/[0-9]+ draws/) {split(substr($0, RSTART, RLENGTH - 6), a, "/"); if (a[1] != a[2]) print}' | cut -c1-200 | head -40
  cat "$OUT/bench_sampling.log" 2>/dev/null | head -40
  grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run|Test +#[0-9]+: .* (Passed|Failed)" "$OUT/gpu_tests.log" | cut -c1-160 | head -60
  cat "$OUT/sm120.log"
  grep -iE "error" "$OUT/build.log" | head -10
} | tee "$OUT/summary.txt"

#!/usr/bin/env bash
# Every GPU test of the project in one call on the accelerator machine (the merged tree): build the
# `default` preset for sm_90 (the machine's card), run `ctest -L gpu` (each kernel family against its CPU
# reference, the CUDA backend against the CPU backend on every fixture), and, in parallel, compile every
# kernel for sm_120 with the ptxas resource report and check its SASS (mma.sync HMMA/QMMA expected, no
# Hopper-only HGMMA/wgmma, no tcgen05). Logs go to $OUT; a summary is printed last.
#
#   COMMIT=<hash> bash scripts/gpu_check.sh   (repository root; the copy there has no .git, hence COMMIT;
#                                             Debian packages the machine lacks come from .carry/debs)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
JOBS=${JOBS:-16}
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
[ -f .carry/debs/env.sh ] && source .carry/debs/env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/device.txt" 2>&1

# sm_120 report, in the background while the sm_90 build and the tests run.
(
  mkdir -p build-sm120
  for f in $(find kernels -name '*.cu' | sort); do
    o=build-sm120/$(echo "$f" | tr / _).o
    echo "== $f"
    nvcc -std=c++17 -O3 -I. --expt-relaxed-constexpr -arch=sm_120 -Xptxas -v -c "$f" -o "$o" 2>&1 |
      grep -E "Used|spill|error" | sed 's/^ptxas info *: //'
    sass=$(cuobjdump --dump-sass "$o" 2>/dev/null)
    echo "SASS $f: HMMA $(grep -c HMMA <<<"$sass") QMMA $(grep -c QMMA <<<"$sass") HGMMA $(grep -c HGMMA <<<"$sass") UTCMMA $(grep -c -E 'UTC.*MMA|tcgen05' <<<"$sass")"
  done
) > "$OUT/sm120.log" 2>&1 &
sm120=$!

stamp "build (sm_90)"
{ cmake --preset default -B build-gpu -DCMAKE_CUDA_ARCHITECTURES=90 -DGLM5RT_BUILD_EXAMPLES=OFF \
    -DGLM5RT_BUILD_BENCH=OFF && cmake --build build-gpu -j"$JOBS" --target glm5rt_gpu_tests; } > "$OUT/build.log" 2>&1
build_rc=$?
stamp "build rc=$build_rc"
tests_rc=-1
if [ $build_rc -eq 0 ]; then
  (cd build-gpu && timeout ${TEST_TIMEOUT:-300} ctest -L gpu -j2 --timeout 240 -V) > "$OUT/gpu_tests.log" 2>&1
  tests_rc=$?
  stamp "gpu tests rc=$tests_rc"
fi
wait $sm120
{
  echo "== $(cat "$OUT/device.txt"), commit ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
  echo "build rc=$build_rc, gpu tests rc=$tests_rc"
  grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|^[0-9]+: \[[a-z-]+\]" "$OUT/gpu_tests.log" | cut -c1-200 | head -150
  grep -E "^SASS" "$OUT/sm120.log"
  grep -E "registers" "$OUT/sm120.log" | sed -E 's/.*Used ([0-9]+) registers.*/\1/' | sort -n | tail -1 | sed 's/^/max registers (sm_120): /'
  grep -E "spill" "$OUT/sm120.log" | grep -v " 0 bytes spill stores, 0 bytes spill loads" | head -5
  grep -iE "error" "$OUT/build.log" | head -10
} | tee "$OUT/summary.txt"

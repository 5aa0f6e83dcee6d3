#!/usr/bin/env bash
# Every GPU test of the project in one call on the accelerator machine (the merged tree): build the
# `default` preset for sm_90 (the machine's card), run `ctest -L gpu` (each kernel family against its CPU
# reference, the CUDA backend against the CPU backend on every fixture), and, in parallel, compile every
# kernel for sm_120 with the ptxas resource report and check its SASS (mma.sync HMMA/QMMA expected, no
# Hopper-only HGMMA/wgmma, no tcgen05). Logs go to $OUT; a summary is printed last.
#
#   COMMIT=<hash> bash scripts/gpu_check.sh   (repository root; the copy there has no .git, hence COMMIT;
#                                             Debian packages the machine lacks come from .carry/debs)
#   GLM5RT_PREBUILT=.carry/final/prebuilt COMMIT=<hash> bash scripts/gpu_check.sh
#       runs the GPU suite built on the development machine (scripts/pack_prebuilt.sh: the folder or
#       its .tar.xz) instead of building here: the whole suite in one doctest process.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
JOBS=${JOBS:-16}
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
[ -f .carry/debs/env.sh ] && source .carry/debs/env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/device.txt" 2>&1

# sm_120 report, in the background while the sm_90 build and the tests run (8 files at a time).
sm120_one() {
  f=$1; o=build-sm120/$(echo "$f" | tr / _).o
  r=$(nvcc -std=c++17 -O3 -I. --expt-relaxed-constexpr -arch=sm_120 -Xptxas -v -c "$f" -o "$o" 2>&1 |
      grep -E "Used|spill|error" | sed 's/^ptxas info *: //')
  sass=$(cuobjdump --dump-sass "$o" 2>/dev/null)
  printf '== %s\n%s\nSASS %s: HMMA %s QMMA %s HGMMA %s UTCMMA %s\n' "$f" "$r" "$f" "$(grep -c HMMA <<<"$sass")" \
    "$(grep -c QMMA <<<"$sass")" "$(grep -c HGMMA <<<"$sass")" "$(grep -c -E 'UTC.*MMA|tcgen05' <<<"$sass")"
}
export -f sm120_one
[ -n "${SKIP_SM120:-}" ] && : > "$OUT/sm120.log" || (
  mkdir -p build-sm120
  find kernels -name '*.cu' | sort | xargs -P 8 -I{} bash -c 'sm120_one {}'
) > "$OUT/sm120.log" 2>&1 &
sm120=$!

TESTS=
if [ -n "${GLM5RT_PREBUILT:-}" ]; then
  [ -d "$GLM5RT_PREBUILT" ] || tar -xJf "$GLM5RT_PREBUILT.tar.xz" -C "$(dirname "$GLM5RT_PREBUILT")"
  export LD_LIBRARY_PATH=$PWD/$GLM5RT_PREBUILT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  src=$(cat "$GLM5RT_PREBUILT/SOURCE_DIR")  # the fixtures' path compiled into the tests
  if [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -sfn "$PWD" "$src"; fi
  if "$GLM5RT_PREBUILT/bin/glm5rt_gpu_tests" --list-test-cases > /dev/null 2> "$OUT/build.log"; then
    TESTS=$GLM5RT_PREBUILT/bin/glm5rt_gpu_tests
    build_rc=prebuilt
  else
    stamp "the prebuilt suite does not run here: building"
  fi
fi
if [ -z "$TESTS" ]; then
  stamp "build (sm_90)"
  { cmake --preset default -B build-gpu -DCMAKE_CUDA_ARCHITECTURES=90 -DGLM5RT_BUILD_EXAMPLES=OFF \
      -DGLM5RT_BUILD_BENCH=OFF && cmake --build build-gpu -j"$JOBS" --target glm5rt_gpu_tests; } > "$OUT/build.log" 2>&1
  build_rc=$?
fi
stamp "build rc=$build_rc"
tests_rc=-1
if [ -n "$TESTS" ]; then
  # One process, every test case (doctest's own summary line: "test cases: N | N passed | 0 failed").
  timeout ${TEST_TIMEOUT:-300} "$TESTS" > "$OUT/gpu_tests.log" 2>&1
  tests_rc=$?
  stamp "gpu tests rc=$tests_rc"
elif [ "$build_rc" = 0 ]; then
  (cd build-gpu && timeout ${TEST_TIMEOUT:-300} ctest -L gpu -j2 --timeout 240 -V) > "$OUT/gpu_tests.log" 2>&1
  tests_rc=$?
  stamp "gpu tests rc=$tests_rc"
fi
wait $sm120
{
  echo "== $(cat "$OUT/device.txt"), commit ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
  echo "build rc=$build_rc, gpu tests rc=$tests_rc"
  grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|test cases:|ERROR|^([0-9]+: )?\[[a-z0-9-]+\]" "$OUT/gpu_tests.log" | cut -c1-200 | head -150
  grep -E "^SASS" "$OUT/sm120.log"
  grep -E "registers" "$OUT/sm120.log" | sed -E 's/.*Used ([0-9]+) registers.*/\1/' | sort -n | tail -1 | sed 's/^/max registers (sm_120): /'
  grep -E "spill" "$OUT/sm120.log" | grep -v " 0 bytes spill stores, 0 bytes spill loads" | head -5
  grep -iE "error" "$OUT/build.log" | head -10
} | tee "$OUT/summary.txt"

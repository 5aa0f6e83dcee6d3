#!/usr/bin/env bash
# The README's test command (and CI's): set up, build, run every test suite through CTest.
# GPU tests report "skipped" on machines without a CUDA GPU.
#   scripts/test.sh          the default preset: every suite (unit, fixture, gpu, abi)
#   scripts/test.sh --asan   also the unit and fixture suites under AddressSanitizer + UBSan (CI does this)
#   scripts/test.sh --tsan   also the unit and fixture suites under ThreadSanitizer (CI does this too)
set -euo pipefail
cd "$(dirname "$0")/.."
asan=0 tsan=0
for a in "$@"; do
  case $a in
    --asan) asan=1 ;;
    --tsan) tsan=1 ;;
    *) echo "usage: scripts/test.sh [--asan] [--tsan]" >&2; exit 2 ;;
  esac
done
scripts/setup.sh
scripts/build.sh default
ctest --preset default -j "${GLM5RT_JOBS:-$(nproc)}" --timeout 1200
# Sanitizers catch what a passing test cannot: reads past buffers, leaks, undefined behaviour, data races on the same
# fixture and malformed-input tests. The fuzz test is left out: it builds its own ASan binaries with clang and
# already ran above.
if [ $asan = 1 ]; then
  scripts/build.sh debug-asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --preset debug-asan -j "${GLM5RT_JOBS:-$(nproc)}" --timeout 1200 -L "unit|fixture" -E fuzz
fi
# ThreadSanitizer: the CPU backend's thread pool, sessions stepped on several threads, cancellation from another
# thread; a report fails its test (halt_on_error).
if [ $tsan = 1 ]; then
  scripts/build.sh debug-tsan
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --preset debug-tsan -j "${GLM5RT_JOBS:-$(nproc)}" --timeout 1200 -L "unit|fixture" -E fuzz
fi

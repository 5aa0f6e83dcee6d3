#!/usr/bin/env bash
# The README's test command (and CI's): set up, build, run every test suite through CTest.
# GPU tests report "skipped" on machines without a CUDA GPU.
#   scripts/test.sh          the default preset: every suite (unit, fixture, gpu, abi)
#   scripts/test.sh --asan   also the unit and fixture suites under AddressSanitizer + UBSan (CI does this)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh default
ctest --preset default -j "${GLM5RT_JOBS:-$(nproc)}" --timeout 1200
if [ "${1:-}" = "--asan" ]; then
  # Sanitizers catch what a passing test cannot: reads past buffers, leaks, undefined behaviour on the
  # same fixture and malformed-input tests. The fuzz test is left out here: it builds its own ASan
  # binaries with clang and already ran above.
  scripts/build.sh debug-asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --preset debug-asan -j "${GLM5RT_JOBS:-$(nproc)}" --timeout 1200 -L "unit|fixture" -E fuzz
fi

#!/usr/bin/env bash
# The README's test command (and CI's): set up, build, run every test suite through CTest.
# GPU tests report "skipped" on machines without a CUDA GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh default
ctest --preset default -j "${GLM5RT_JOBS:-$(nproc)}" --timeout 1200

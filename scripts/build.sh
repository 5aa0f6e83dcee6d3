#!/usr/bin/env bash
# Configures and builds one CMake preset (default: "default" = CPU backend + CUDA kernels when nvcc is
# found). Usage: scripts/build.sh [preset]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-default}
# nvcc lives outside PATH on a stock CUDA install; let CMake find it.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "${GLM5RT_JOBS:-$(nproc)}"

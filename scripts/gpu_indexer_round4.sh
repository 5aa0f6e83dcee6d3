#!/usr/bin/env bash
# Indexer round 4 on the device from the prebuilt bundle (scripts/pack_prebuilt.sh; no build there), about
# 40 s: the indexer's GPU tests (each runs round 3's and round 4's paths against the CPU reference), the
# same tests with the round-4 defaults switched off, then batch-1 decode at 1K/8K/32K/128K, FP8 and bf16,
# timing round 3 and round 4 in one process (total_r3_us / total_r4_us in the JSON; summary table last).
#
#   COMMIT=<hash> OUT=<dir> bash scripts/gpu_indexer_round4.sh          (device, carry .carry/final)
#
# The flip back to round 3: GLM5RT_INDEXER_ROUND4=0 in the environment, or return false from
# detail::round4_default() in kernels/indexer/indexer_launch.cu.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
P=${GLM5RT_PREBUILT:-.carry/final/prebuilt}
COMMIT=${COMMIT:-unknown}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "== indexer GPU tests (round 3 and round 4 paths)"
timeout 90 "$P/bin/glm5rt_gpu_tests" -tc='indexer*' 2>&1 | tail -4
echo "== the same with GLM5RT_INDEXER_ROUND4=0 (automatic paths = round 3)"
GLM5RT_INDEXER_ROUND4=0 timeout 90 "$P/bin/glm5rt_gpu_tests" -tc='indexer scores + top-k*' 2>&1 | tail -3
echo "== bench_indexer --b1 (round 3 vs round 4, same process)"
timeout 90 "$P/bin/bench_indexer" "$OUT/indexer-r4-h200.json" --b1 --commit "$COMMIT" \
  --command "bench_indexer OUT/indexer-r4-h200.json --b1 (scripts/gpu_indexer_round4.sh)" 2>&1 | tail -12

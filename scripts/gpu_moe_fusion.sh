#!/usr/bin/env bash
# The MoE decode fusion (MoeParams::decode_fusion) on a GPU machine from prebuilt binaries, ~30-60 s:
# the MoE / FP8 GEMM test cases (every check_moe case compares fusion levels 1 and 2 bit for bit with
# level 0, eagerly and from graphs), then the MoE bench at T = 1, 8 whose rows unfused / fuse-comb /
# fuse-swig (and default = the library default) time the levels in the same process.
#   P=.carry/final/prebuilt OUT=/tmp/out COMMIT=<hash> bash scripts/gpu_moe_fusion.sh
# Flip back: kernels/moe/moe.h `int decode_fusion = 2;` -> 1 (combine only) or 0 (separate kernels).
set -uo pipefail
cd "$(dirname "$0")/.."
P=${P:-${GLM5RT_PREBUILT:-.carry/final/prebuilt}}
OUT=${OUT:-$PWD/gpu-out}
COMMIT=${COMMIT:-unknown}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
timeout 120 "$P/bin/glm5rt_gpu_tests" -tc="*MoE*,*fp8*" 2>&1 | tail -n 30 | tee "$OUT/moe-fusion-tests.txt"
timeout 60 "$P/bin/glm5rt_bench_moe" --json "$OUT/moe-h200-t1-t8.json" --commit "$COMMIT" --tokens 1,8 2>&1 |
  tail -n 24 | tee "$OUT/moe-fusion-bench.txt"

#!/usr/bin/env bash
# The merged tree's whole device check in one call, from binaries built on the development machine
# (scripts/pack_prebuilt.sh; no build on the device): every GPU test (scripts/gpu_check.sh, with the sm_120
# ptxas / SASS report in the background), the device sampler's tests again with the round-1 kernel, then
# the benchmarks that changed since their last recorded run: the forward at GLM-5 dimensions (batched vs
# per-sequence attention launches, stage times), the MoE layer at T = 1, 8 and the device sampler.
#
#   bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt     (here; build-gpu90 = the default
#                                      preset with -DCMAKE_CUDA_ARCHITECTURES=90, targets glm5rt_gpu_tests,
#                                      glm5rt-bench, glm5rt_bench_moe, bench_sampling)
#   COMMIT=<hash> bash scripts/gpu_release_check.sh                      (device, carry .carry/final)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
P=${GLM5RT_PREBUILT:-.carry/final/prebuilt}
COMMIT=${COMMIT:-unknown}
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
GLM5RT_PREBUILT=$P COMMIT=$COMMIT OUT=$OUT bash scripts/gpu_check.sh > "$OUT/check.txt" 2>&1
stamp "gpu_check done" | tee "$OUT/bench.txt"
export LD_LIBRARY_PATH=$PWD/$P/lib
{
  GLM5RT_SAMPLING_KERNEL=v1 timeout 60 "$P/bin/glm5rt_gpu_tests" -tc="cuda device sampling*" 2>&1 | tail -3
  stamp "forward bench"
  timeout 150 "$P/bin/glm5rt-bench" --glm5-dims --layers 4 --dense-layers 1 --batches 1,32 --contexts 8192 \
    --prefill 4096 --steps 10 --stages --variants fast:auto,fast:auto:perseq --commit "$COMMIT" \
    --json "$OUT/forward-h200.json" 2>&1 | grep -v "^\s*$" | tail -40
  stamp "moe bench"
  timeout 60 "$P/bin/glm5rt_bench_moe" --json "$OUT/moe-h200-t1-t8.json" --commit "$COMMIT" --tokens 1,8 2>&1 | tail -24
  stamp "sampling bench"
  timeout 40 "$P/bin/bench_sampling" --iters 20 --kernels 12 --commit "$COMMIT" --json "$OUT/sampling-h200.json" 2>&1 | tail -30
  stamp "end"
} >> "$OUT/bench.txt" 2>&1
cat "$OUT/summary.txt" "$OUT/bench.txt"

#!/usr/bin/env bash
# The merged tree's whole device check in one call, from binaries built on the development machine
# (scripts/pack_prebuilt.sh; no build on the device): every GPU test (scripts/gpu_check.sh, with the sm_120
# ptxas / SASS report in the background), then the benchmarks of what changed since their last recorded
# run: the forward at GLM-5 dimensions (4 and 2 layers: one layer by difference; stage times; the MoE
# shared expert on one stream), the MoE layer at T = 1, 8, the batch-1 indexer (round 3 vs 4) and the
# sparse MLA merges of split partials. The JSON files come back in $OUT/json.tgz.
#
#   bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt     (here; build-gpu90 = the default
#                                      preset with -DCMAKE_CUDA_ARCHITECTURES=90, targets glm5rt_gpu_tests,
#                                      glm5rt-bench, glm5rt_bench_moe, bench_indexer, glm5rt_bench_sparse_mla)
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
J=$OUT/json; mkdir -p "$J"   # the JSON files come back as one archive (the tool returns at most 8 files)
B=$P/bin
{
  stamp "forward bench: 4 layers (1 dense), 8K and 32K context"
  timeout 120 "$B/glm5rt-bench" --glm5-dims --layers 4 --dense-layers 1 --batches 1,32 --contexts 8192,32768 \
    --prefill 4096 --steps 10 --stages --commit "$COMMIT" --json "$J/forward-h200.json" 2>&1 | grep -v "^\s*$" | tail -24
  stamp "forward bench: 2 layers (one layer = the difference)"
  timeout 60 "$B/glm5rt-bench" --glm5-dims --layers 2 --dense-layers 1 --batches 1,32 --contexts 8192,32768 \
    --prefill 0 --steps 10 --commit "$COMMIT" --json "$J/forward-h200-2layers.json" 2>&1 | grep -v "^\s*$" | tail -8
  python3 bench/forward/layer_json.py "$J/forward-h200.json" "$J/forward-h200-2layers.json" "$J/layer-h200.json" 2>&1 | tail -12
  stamp "forward bench: MoE shared expert on the main stream (decode fusion applies)"
  GLM5RT_CUDA_MOE_SIDE_STREAM=0 timeout 60 "$B/glm5rt-bench" --glm5-dims --layers 4 --dense-layers 1 --batches 1,32 \
    --contexts 8192 --prefill 0 --steps 10 --stages --commit "$COMMIT" --json "$J/forward-h200-noside.json" 2>&1 |
    grep -v "^\s*$" | tail -8
  stamp "moe bench"
  timeout 60 "$B/glm5rt_bench_moe" --json "$J/moe-h200-t1-t8.json" --commit "$COMMIT" --tokens 1,8 2>&1 | tail -24
  stamp "indexer bench (batch 1, round 3 vs round 4)"
  timeout 90 "$B/bench_indexer" "$J/indexer-r4-h200.json" --b1 --commit "$COMMIT" --command "bench_indexer --b1" 2>&1 | tail -30
  stamp "sparse MLA bench (merge of the split partials: old vs chunked vs fused)"
  timeout 90 "$B/glm5rt_bench_sparse_mla" --combine-compare --no-sweep --quick --T 1,8,128 --H 8,16,64 --reps 9 \
    --json "$J/sparse_mla_combine.json" 2>&1 | tail -40
  stamp "end"
} >> "$OUT/bench.txt" 2>&1
tar -czf "$OUT/json.tgz" -C "$OUT" json && rm -rf "$J"
cat "$OUT/summary.txt" "$OUT/bench.txt"

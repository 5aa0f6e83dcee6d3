#!/usr/bin/env bash
# The merged tree's whole device check in one call, from binaries built on the development machine
# (scripts/pack_prebuilt.sh; no build on the device): every GPU test (scripts/gpu_check.sh, with the sm_120
# ptxas / SASS report in the background), then the benchmarks of what changed since their last recorded
# run (session 3): sparse MLA FP8 variant 7 beside variant 2 and bf16; the indexer's batch-1 table (cluster
# select) and FP8 vs int8 keys; the MoE layer at T = 1, 8 (fast / slow selection);
# the dense projections per shape and grouped; the forward at GLM-5 dimensions (4 and 2 layers: one layer
# by difference; grouped projections off / on; FP8 cache records). The JSON files come back in $OUT/json.tgz.
#
#   bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt     (here; build-gpu90 = the default
#                                      preset with -DCMAKE_CUDA_ARCHITECTURES=90, targets glm5rt_gpu_tests,
#                                      glm5rt-bench, glm5rt_bench_moe, bench_indexer, glm5rt_bench_sparse_mla,
#                                      glm5rt_bench_proj)
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
  if [ -z "${SKIP_KERNEL_BENCH:-}" ]; then
  stamp "sparse MLA: FP8 variant 7 beside variant 2 and bf16 records"
  timeout 60 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --T 1,8,128 --H 8,16,64 --variants 2,7 --v7-splits 2 --commit "$COMMIT" \
    --reps 9 --json "$J/sparse_mla-h200-final.json" 2>&1 | tail -30
  stamp "indexer: batch-1 table (default = cluster select for <= 4 rows)"
  timeout 90 "$B/bench_indexer" "$J/indexer-h200-final-b1.json" --b1 --commit "$COMMIT" --command "bench_indexer --b1" 2>&1 | tail -24
  stamp "indexer: FP8 vs int8 keys"
  timeout 60 "$B/bench_indexer" "$J/indexer-int8-h200.json" --int8 --commit "$COMMIT" --command "bench_indexer --int8" 2>&1 | tail -16
  stamp "dense projections (per shape, one layer grouped)"
  timeout 90 "$B/glm5rt_bench_proj" --quick --reps 9 --commit "$COMMIT" --json "$J/proj-h200.json" 2>&1 | tail -40
  fi
  stamp "moe (defaults, fast / slow selection)"
  timeout 90 "$B/glm5rt_bench_moe" --tokens 1,8 --commit "$COMMIT" --json "$J/moe-h200-final.json" \
    --rows default,shared-strm,fast-sel-shstrm,slow-sel,fused-rf,fused-rf-shstrm,fused-rf-1p,fused-rf-1p-shstrm,perm-1p 2>&1 | tail -45
  stamp "forward bench: 4 layers (1 dense): default, attention fusion on, grouped projections off; bf16 cache"
  timeout 150 "$B/glm5rt-bench" --glm5-dims --layers 4 --dense-layers 1 --batches 1,32 --contexts 8192,32768 \
    --prefill 4096 --steps 10 --stages --variants fast:auto:nofuse,fast:auto:fuse,fast:auto:nogroup \
    --commit "$COMMIT" --json "$J/forward-h200.json" 2>&1 | grep -v "^\s*$" | tail -45
  stamp "forward bench: 2 layers (one layer = the difference)"
  timeout 90 "$B/glm5rt-bench" --glm5-dims --layers 2 --dense-layers 1 --batches 1,32 --contexts 8192,32768 \
    --prefill 0 --steps 10 --commit "$COMMIT" --json "$J/forward-h200-2layers.json" 2>&1 | grep -v "^\s*$" | tail -8
  python3 bench/forward/layer_json.py "$J/forward-h200.json" "$J/forward-h200-2layers.json" "$J/layer-h200.json" 2>&1 | tail -12
  stamp "forward bench: FP8 cache records (latent 656 B, indexer keys 132 B)"
  timeout 90 "$B/glm5rt-bench" --glm5-dims --layers 4 --dense-layers 1 --batches 1,32 --contexts 8192,32768 \
    --prefill 0 --steps 10 --stages --cache-dtype fp8 --commit "$COMMIT" --json "$J/forward-h200-fp8cache.json" 2>&1 |
    grep -v "^\s*$" | tail -12
  stamp "end"
} >> "$OUT/bench.txt" 2>&1
tar -czf "$OUT/json.tgz" -C "$OUT" json && rm -rf "$J"
cat "$OUT/summary.txt" "$OUT/bench.txt"

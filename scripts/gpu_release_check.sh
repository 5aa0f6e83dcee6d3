#!/usr/bin/env bash
# The merged tree's whole device check in one call, from binaries built on the development machine
# (scripts/pack_prebuilt.sh; no build on the device): every GPU test (scripts/gpu_check.sh, with the sm_120
# ptxas / SASS report in the background), then the benchmarks of what changed in session 4: the MoE layer at every issue size (whole-line weight copies
# now the default; s4-base = the previous defaults) with the cuBLASLt ceilings; sparse MLA at T = 1, 8, 128 x
# H = 8..128 and prefill 4096 x 64 (bf16 split partials now the automatic merge); the device sampling kernels; the forward at GLM-5
# dimensions (4 and 2 layers: one layer by difference; default, and the ungrouped split-K path that now reads
# the weights in place). With FULL=1 also the indexer, projection and FP8-cache rows of session 3.
# The JSON files come back in $OUT/json.tgz.
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
  stamp "moe: T = 1 .. 4096, defaults (line copies) and the previous defaults, with the GEMM ceilings"
  timeout 120 "$B/glm5rt_bench_moe" --tokens 1,8,64,512,4096 --commit "$COMMIT" --json "$J/moe-h200.json" \
    --rows default,shared-strm,s4-base,s4-base-shstrm 2>&1 | tail -40
  stamp "sparse MLA: T = 1, 8, 128 x H = 8..128, prefill 4096 x 64"
  timeout 150 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --T 1,8,128 --H 8,16,64,128 --variants 2,5,7,10,11 \
    --prefill-T 4096 --prefill-H 64 --commit "$COMMIT" --reps 9 --json "$J/sparse_mla-h200-final.json" 2>&1 | tail -30
  stamp "device sampling kernels (v1 / v2)"
  timeout 60 "$B/bench_sampling" --iters 20 --commit "$COMMIT" --json "$J/sampling-h200.json" 2>&1 | tail -20
  stamp "forward bench: 4 layers (1 dense): default; ungrouped projections with split-K in place"
  timeout 150 "$B/glm5rt-bench" --glm5-dims --layers 4 --dense-layers 1 --batches 1,32 --contexts 8192,32768 \
    --prefill 4096 --steps 10 --stages --variants fast:auto,fast:auto:nogroup:nofuse \
    --commit "$COMMIT" --json "$J/forward-h200.json" 2>&1 | grep -v "^\s*$" | tail -45
  stamp "forward bench: 2 layers (one layer = the difference)"
  timeout 90 "$B/glm5rt-bench" --glm5-dims --layers 2 --dense-layers 1 --batches 1,32 --contexts 8192,32768 \
    --prefill 0 --steps 10 --commit "$COMMIT" --json "$J/forward-h200-2layers.json" 2>&1 | grep -v "^\s*$" | tail -8
  python3 bench/forward/layer_json.py "$J/forward-h200.json" "$J/forward-h200-2layers.json" "$J/layer-h200.json" 2>&1 | tail -12
  if [ -n "${FULL:-}" ]; then
  stamp "indexer: batch-1 table"
  timeout 90 "$B/bench_indexer" "$J/indexer-h200-final-b1.json" --b1 --commit "$COMMIT" --command "bench_indexer --b1" 2>&1 | tail -24
  stamp "dense projections (per shape, one layer grouped)"
  timeout 90 "$B/glm5rt_bench_proj" --quick --reps 9 --commit "$COMMIT" --json "$J/proj-h200.json" 2>&1 | tail -40
  stamp "forward bench: FP8 cache records (latent 656 B, indexer keys 132 B)"
  timeout 90 "$B/glm5rt-bench" --glm5-dims --layers 4 --dense-layers 1 --batches 1,32 --contexts 8192,32768 \
    --prefill 0 --steps 10 --stages --cache-dtype fp8 --commit "$COMMIT" --json "$J/forward-h200-fp8cache.json" 2>&1 |
    grep -v "^\s*$" | tail -12
  fi
  stamp "end"
} >> "$OUT/bench.txt" 2>&1
tar -czf "$OUT/json.tgz" -C "$OUT" json && rm -rf "$J"
cat "$OUT/summary.txt" "$OUT/bench.txt"

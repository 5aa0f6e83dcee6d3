#!/usr/bin/env bash
# Sparse MLA round 4 on the device from prebuilt binaries (no build): the sparse MLA GPU tests (every
# kernel variant x every combine: round 3's combine kernel, the chunked kernel, the fused last-CTA merge;
# multi-pool too), then the benchmark timing the automatic path (new merges) against the old combine kernel
# in the same process: decode T in {1, 8, 128}, H in {8, 16, 64}, bf16 and FP8 records. ~30-45 s of device time.
#
#   P=<prebuilt dir holding bin/> OUT=<dir> bash scripts/gpu_mla_combine.sh
#
# Look for: the "old / auto" column (> 1 = the new merge is faster); T=1 and T=128 H=8 bf16 "auto" against
# the 10 us and 85 us targets. Flip back to the old path without a rebuild: GLM5RT_MLA_COMBINE=1 (the
# environment), or in code: combine_mode() in kernels/attention/sparse_mla.cu.
set -uo pipefail
cd "$(dirname "$0")/.."
P=${P:-${GLM5RT_PREBUILT:-.carry/final/prebuilt}}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
[ -d "$P/lib" ] && export LD_LIBRARY_PATH=$PWD/$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
timeout 90 "$P/bin/glm5rt_gpu_tests" -tc="sparse MLA*,multi-pool sparse MLA*" > "$OUT/mla_tests.txt" 2>&1
echo "sparse MLA tests exit code: $?"
tail -4 "$OUT/mla_tests.txt"
timeout 60 "$P/bin/glm5rt_bench_sparse_mla" --combine-compare --no-sweep --quick --T 1,8,128 --H 8,16,64 \
  --reps 9 --json "$OUT/sparse_mla_combine.json" 2>&1 | tail -22

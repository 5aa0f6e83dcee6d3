#!/usr/bin/env bash
# Session 17: issue 6's benchmark shapes at several top-k sizes (TOPKS, default 256 512 1024 2048), so that a fit of
# time against a CTA's steps separates its fixed cost (prologue: indices, Q, first landings; epilogue: the stores)
# from its per-step cost. Decode T = BENCH_TS (128) x H = BENCH_HS (64,8), prefill BENCH_PT (4096) x BENCH_PH (64),
# both formats, automatic plans; binaries of the bundle from scripts/prebuild_mla_sm90.sh.
#   P=.carry/s17/prebuilt COMMIT=<sha> OUT=$OUT bash scripts/gpu_mla_topk.sh          (device, carry .carry/s17)
# Everything is packed into $OUT/topk.tgz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/lib/device_prebuilt.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  for run in $(seq 1 "${RUNS:-1}"); do
    for k in ${TOPKS:-256 512 1024 2048}; do
      stamp "top-k $k, run $run"
      timeout 200 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats "${FMTS:-bf16,fp8}" --variants 0 \
        --T "${BENCH_TS:-128}" --H "${BENCH_HS:-64,8}" --prefill-T "${BENCH_PT:-4096}" --prefill-H "${BENCH_PH:-64}" \
        --topk "$k" --reps 9 --commit "$COMMIT" --json "$OUT/topk$k-run$run.json" > "$OUT/topk$k-run$run.txt" 2>&1
      echo "rc $?"; grep -E "^(decode|prefill) " "$OUT/topk$k-run$run.txt" | sed 's/  */ /g; s/ v1 .*//'
    done
  done
  stamp done
} 2>&1 | tee "$OUT/log.txt"
tar -czf "$OUT/topk.tgz" -C "$OUT" --exclude=topk.tgz . 2>/dev/null

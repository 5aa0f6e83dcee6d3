#!/usr/bin/env bash
# Session 10's device calls, from binaries built on the development machine (scripts/pack_prebuilt.sh): variant 13
# (variant 10's 16-head CTA as two token groups) against variant 10.
#   tests   every sparse MLA test case (variant 13 is in every variant x merge loop)
#   rows    bf16 rows at T = 1, 2, 4, 8, 32, 128 x H = 16, 32, 64, 128 with variants 10 and 13 timed on the same
#           inputs at the automatic plan (twice, two processes)
#   sweep   the bf16 small-T plan sweep (T = 1, 2, 4, 8; every heads per CTA x splits x merge) with the automatic
#           16-head kernel variant 10 (GLM5RT_MLA_V13=0) and variant 13 (=1), alternating, two processes each
#           (variant 13 was measured slower in call 1 and removed: these two parts need db43314's binaries)
#   final   the whole GPU test binary, then issue 6's benchmark of record (scripts/gpu_mla.sh: the Triton baseline
#           and the machine's ceilings in the same run; files in mla.tgz)
#   midt    the split counts 1, 2, 3, 4, 6, 8 forced at T = 16 .. 256 x H = 8 .. 64, both formats, against the
#           automatic plan (two processes each; JSON and logs in $MIDT_TAG.tgz, default midt)
#
#   rm -rf .carry/final && bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt \
#     && rm -rf .carry/final/prebuilt                                                               (here)
#   COMMIT=<sha> OUT=$OUT bash scripts/gpu_mla_s10.sh                          (device, carry .carry/final)
# Optional: PARTS (default "tests rows sweep"), ROW_TS, ROW_HS, MIDT_TS, MIDT_HS, MIDT_SPLITS, MIDT_TAG.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/lib/device_prebuilt.sh
parts=" ${PARTS:-tests rows sweep} "
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  if [[ $parts == *" tests "* ]]; then
    stamp "sparse MLA tests"
    sparse_mla_tests 300
  fi
  if [[ $parts == *" rows "* ]]; then
    for run in 1 2; do
      stamp "rows, run $run"
      timeout 200 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats bf16 --T "${ROW_TS:-1,2,4,8,32,128}" \
        --H "${ROW_HS:-16,32,64,128}" --variants 10,13 --prefill-T 1024 --prefill-H 16 --reps 9 --commit "$COMMIT" \
        --json "$OUT/rows-run$run.json" 2>&1 | grep -E "^(decode|prefill) " | sed 's/  */ /g; s/ v1 0.00 v2 0.00 v3 0.00//; s/ v7 0.00 us (0 splits)//'
    done
  fi
  if [[ $parts == *" sweep "* ]]; then
    for v in 0 1 0 1; do
      stamp "plan sweep bf16, GLM5RT_MLA_V13=$v"
      GLM5RT_MLA_V13=$v timeout 200 "$B/glm5rt_bench_sparse_mla" --plan-sweep --no-sweep --quick --formats bf16 \
        --T 1,2,4,8 --H 16,32,64,128 --reps 9 --commit "$COMMIT" --json "$OUT/plans-v13-$v-$SECONDS.json" \
        > "$OUT/plans-v13-$v-log.txt" 2>&1
      grep -E "^plan" "$OUT/plans-v13-$v-log.txt" | sed 's/  */ /g'
    done
  fi
  if [[ $parts == *" final "* ]]; then
    stamp "whole GPU test binary"
    gpu_tests_all
    stamp "issue 6 benchmark of record (Triton baseline, ceilings)"
    mla_record
  fi
  if [[ $parts == *" midt "* ]]; then
    tag=${MIDT_TAG:-midt}
    mkdir -p "$OUT/$tag"
    for run in 1 2; do
      for f in bf16 fp8; do
        stamp "mid-T split sweep $f, run $run"
        timeout 280 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats $f --T "${MIDT_TS:-16,24,32,48,64,96,128,192,256}" \
          --H "${MIDT_HS:-8,16,32,64}" --variants 0 --force-splits "${MIDT_SPLITS:-1,2,3,4,6,8}" --force-variants 0 --reps 7 \
          --commit "$COMMIT" --json "$OUT/$tag/$tag-$f-run$run.json" > "$OUT/$tag/$tag-$f-run$run-log.txt" 2>&1
        echo "rc $? $(grep -c forced "$OUT/$tag/$tag-$f-run$run-log.txt") forced timings"
      done
    done
    tar -czf "$OUT/$tag.tgz" -C "$OUT" "$tag" && rm -rf "${OUT:?}/$tag"
  fi
  stamp end
} 2>&1 | tee -a "$OUT/s10-log.txt"

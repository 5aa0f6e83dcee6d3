#!/usr/bin/env bash
# Session 11's device calls, from binaries built on the development machine (scripts/prebuild_mla_sm90.sh or
# scripts/pack_prebuilt.sh): variant 14 (four warp pairs for a CTA's 64 heads) against variant 11.
#   tests   every sparse MLA test case (variant 14 is in every variant x merge loop and the multi-pool list)
#   rows    bf16 rows at T = 8, 32, 128 x H = 64, 128 and prefill 1024 / 4096 x 64 with variants 11 and 14 timed on
#           the same inputs (twice, two processes); ROW_TS / ROW_HS / ROW_PT override the shapes, ROW_FMTS the record
#           formats (session 12: fp8) and ROW_VARS the variants (default 11,14)
#   splits  variant 14 with 1, 2, 4 splits forced at T = 32, 64, 128 x H = 64, 128 (SPLIT_TS / SPLIT_HS; SPLIT_FMTS)
#   ab      variant 14's forms: AB_FORMS="new:VAR=1 new:VAR=0 old:VAR=1" (old = OLD_BENCH, an earlier benchmark build,
#           .xz; VAR=value+VAR2=value2 sets two), the sparse MLA tests first with AB_TEST_ENV (VAR=value); AB_FMTS the
#           record formats (default bf16)
#   profile Nsight Compute of variant 14 at T=128 H=64 (scripts/gpu_mla_profile.sh SET=v14; profile.tgz)
#   final   the whole GPU test binary, then issue 6's benchmark of record (scripts/gpu_mla.sh: the Triton baseline
#           and the machine's ceilings in the same run; files in mla.tgz)
#
#   JOBS=2 bash scripts/prebuild_mla_sm90.sh /tmp/pb && mkdir -p .carry/s11/prebuilt && cp -r /tmp/pb/bin \
#     .carry/s11/prebuilt/ && mkdir -p .carry/s11/prebuilt/lib && pwd > .carry/s11/prebuilt/SOURCE_DIR        (here)
#   P=.carry/s11/prebuilt COMMIT=<sha> OUT=$OUT bash scripts/gpu_mla_s11.sh             (device, carry .carry/s11)
# Optional: PARTS (default "tests rows").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/lib/device_prebuilt.sh
parts=" ${PARTS:-tests rows} "
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  # A first look at variant 14 (one small case, a short timeout) before anything that would hang on it for minutes.
  stamp "smoke: heads-per-CTA overrides"
  timeout 60 "$B/glm5rt_gpu_tests" -tc="*heads-per-CTA overrides*" > "$OUT/smoke.txt" 2>&1
  rc=$?; echo "rc $rc"; tail -3 "$OUT/smoke.txt"
  [ $rc -eq 0 ] || { stamp "smoke failed: stop"; exit 1; }
  if [[ $parts == *" tests "* ]]; then
    stamp "sparse MLA tests"
    sparse_mla_tests 200
  fi
  if [[ $parts == *" rows "* ]]; then
    for run in 1 2; do
      stamp "rows, run $run"
      timeout 150 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats "${ROW_FMTS:-bf16}" --T "${ROW_TS:-8,32,128}" \
        --H "${ROW_HS:-64,128}" --variants "${ROW_VARS:-11,14}" --prefill-T "${ROW_PT:-1024,4096}" --prefill-H 64 --reps 9 \
        --commit "$COMMIT" --json "$OUT/rows-run$run.json" 2>&1 | grep -E "^(decode|prefill) " | sed 's/  */ /g'
    done
  fi
  if [[ $parts == *" splits "* ]]; then
    stamp "variant 14 forced splits"
    timeout 200 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats "${SPLIT_FMTS:-bf16}" --T "${SPLIT_TS:-32,64,128}" \
      --H "${SPLIT_HS:-64,128}" --variants 11,14 --force-splits 1,2,4 --force-variants 14 --reps 7 \
      --commit "$COMMIT" --json "$OUT/splits.json" 2>&1 | grep -E "forced|^decode " | sed 's/  */ /g'
  fi
  if [[ $parts == *" ab "* ]]; then
    # Forms of variant 14: AB_FORMS = "build:VAR=value ..." (build = new, the bundle's benchmark, or old, OLD_BENCH:
    # an earlier build, xz-compressed), alternating, two processes each; the tests first with AB_TEST_ENV.
    if [ -n "${AB_TEST_ENV:-}" ]; then
      stamp "sparse MLA tests, $AB_TEST_ENV"
      env "$AB_TEST_ENV" timeout 200 "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" 2>&1 | tail -3
    fi
    [ -n "${OLD_BENCH:-}" ] && xz -dc "$OLD_BENCH" > "$OUT/old_bench" && chmod +x "$OUT/old_bench"
    for run in 1 2; do
      for form in ${AB_FORMS:?set AB_FORMS}; do
        build=${form%%:*} assign=${form#*:}
        bin=$B/glm5rt_bench_sparse_mla; [ "$build" = old ] && bin=$OUT/old_bench
        stamp "ab $form, run $run"
        env ${assign//+/ } timeout 120 "$bin" --no-sweep --quick --formats "${AB_FMTS:-bf16}" --T "${AB_TS:-32,128}" --H 64,128 \
          --variants 14 --prefill-T 4096 --prefill-H 64 --reps 9 --commit "$COMMIT-$form" \
          --json "$OUT/ab-${build}-${assign//[^A-Za-z0-9]/_}-run$run.json" 2>&1 | grep -E "^(decode|prefill) " |
          sed 's/  */ /g; s/ v1 0.00 v2 0.00 v3 0.00 v5 0.00 us (0 splits) v7 0.00 us (0 splits) v10 0.00 v11 0.00//'
      done
    done
    rm -f "$OUT/old_bench"
  fi
  if [[ $parts == *" profile "* ]]; then
    SET=v14 bash scripts/gpu_mla_profile.sh
  fi
  if [[ $parts == *" final "* ]]; then
    stamp "whole GPU test binary"
    gpu_tests_all
    stamp "issue 6 benchmark of record (Triton baseline, ceilings)"
    mla_record
  fi
  stamp end
} 2>&1 | tee -a "$OUT/s11-log.txt"

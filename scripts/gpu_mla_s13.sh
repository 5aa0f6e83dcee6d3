#!/usr/bin/env bash
# Session 13's device calls (and session 14's), from binaries built on the development machine
# (scripts/prebuild_mla_sm90.sh):
#   smoke   the planner cases at T = 1 with a 60 s timeout; on failure nothing else runs
#   tests   every sparse MLA test case (session 12's last review commit had not run on the GPU); TEST_ENV="VAR=value"
#           (TEST_TIMEOUT seconds, default 240; PLAN_TIMEOUT likewise for each plan sweep)
#           runs them with that environment variable set (session 14: a tuning knob forced on for every shape)
#   plan    the plan sweep at T <= 8 (every heads per CTA, now including variant 14's 64, x split count x merge)
#           at T = PLAN_TS (default 1,2,4,8) x H = PLAN_HS (64,128), formats PLAN_FMTS (bf16,fp8), PLAN_RUNS processes;
#           with AB_VAR set (session 14), one process per value of AB_VALUES with AB_VAR=value, alternating as listed
#   bench   (session 14) the decode / prefill benchmark once per value of AB_VALUES with AB_VAR=value: T = BENCH_TS
#           (1,8,32,128) x H = BENCH_HS (8,16,64,128), prefill BENCH_PT (4096) x BENCH_PH (64), both formats, the
#           automatic plan only (BENCH_VARIANTS: the kernel variants timed besides it, default none), plus BENCH_EXTRA
#           (more benchmark flags, e.g. "--force-splits 1,2"); scripts/gpu_mla_env_ab.sh runs this part
#   timeline (session 15) the T=1 timeline probe (glm5rt_bench_mla_timeline) per AB value; TL_HS (128,64), TL_EXTRA
#           (more flags, e.g. "--hc 16 --splits 32")
#   model   the whole-model decode benchmark (FP8 cache, batches MODEL_BATCHES) with variant 14 on / off (whole bundle)
#   final   the whole GPU test binary, then issue 6's benchmark of record (mla_record: scripts/gpu_mla.sh)
#
#   JOBS=2 bash scripts/prebuild_mla_sm90.sh /tmp/pb && mkdir -p .carry/s13/prebuilt/lib && cp -r /tmp/pb/bin \
#     .carry/s13/prebuilt/ && pwd > .carry/s13/prebuilt/SOURCE_DIR                     (here; then tar -cJf)
#   P=.carry/s13/prebuilt COMMIT=<sha> OUT=$OUT bash scripts/gpu_mla_s13.sh              (device, carry .carry/s13)
# Optional: PARTS (default "smoke tests plan"). Everything written to $OUT is packed into $OUT/s13.tgz at the end
# (the device tool returns only a few files).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/lib/device_prebuilt.sh
parts=" ${PARTS:-smoke tests plan} "
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  if [[ $parts == *" smoke "* ]]; then
    # One small case with a short timeout before anything that could hang for minutes (session 13: the cooperative
    # merge's CTAs wait for each other).
    stamp "smoke: planner choices at T = 1"
    timeout 60 "$B/glm5rt_gpu_tests" -tc="*planner choices at T = 1*" > "$OUT/smoke.txt" 2>&1
    rc=$?; echo "rc $rc"; tail -3 "$OUT/smoke.txt"; grep -E "ERROR|FAIL" "$OUT/smoke.txt" | head -5
    [ $rc -eq 0 ] || { stamp "smoke failed: stop"; PARTS=""; parts=" "; }
  fi
  if [[ $parts == *" tests "* ]]; then
    stamp "sparse MLA tests ${TEST_ENV:-}"
    # shellcheck disable=SC2086,SC2163  # TEST_ENV is VAR=value: export its content
    ( [ -n "${TEST_ENV:-}" ] && export ${TEST_ENV}; sparse_mla_tests "${TEST_TIMEOUT:-240}" )
  fi
  # One run per plan-sweep process: "run<n>" plainly, "<value>-run<n>" with AB_VAR=value.
  runs=()
  if [ -n "${AB_VAR:-}" ]; then
    n=0; for v in ${AB_VALUES:?set AB_VALUES}; do n=$((n + 1)); runs+=("$v:$n"); done
  else
    for n in $(seq 1 "${PLAN_RUNS:-1}"); do runs+=(":$n"); done
  fi
  if [[ $parts == *" plan "* ]]; then
    for r in "${runs[@]}"; do
      v=${r%%:*}; n=${r##*:}; tag=${v:+$v-}run$n
      stamp "plan sweep, run $n${v:+, $AB_VAR=$v}"
      env ${v:+"$AB_VAR=$v"} timeout "${PLAN_TIMEOUT:-240}" "$B/glm5rt_bench_sparse_mla" --plan-sweep --no-sweep --quick \
        --formats "${PLAN_FMTS:-bf16,fp8}" --T "${PLAN_TS:-1,2,4,8}" --H "${PLAN_HS:-64,128}" --reps 9 --commit "$COMMIT" \
        --json "$OUT/plan-$tag.json" > "$OUT/plan-$tag.txt" 2>&1
      echo "rc $?"; grep -E "^plan " "$OUT/plan-$tag.txt" | sed 's/  */ /g'
    done
  fi
  if [[ $parts == *" bench "* ]]; then
    for r in "${runs[@]}"; do
      v=${r%%:*}; n=${r##*:}; tag=${v:+$v-}run$n
      stamp "bench, run $n${v:+, $AB_VAR=$v}"
      env ${v:+"$AB_VAR=$v"} timeout 200 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats bf16,fp8 \
        --T "${BENCH_TS:-1,8,32,128}" --H "${BENCH_HS:-8,16,64,128}" --variants "${BENCH_VARIANTS:-0}" --prefill-T "${BENCH_PT:-4096}" \
        --prefill-H "${BENCH_PH:-64}" --reps 9 ${BENCH_EXTRA:-} --commit "$COMMIT" --json "$OUT/bench-$tag.json" \
        > "$OUT/bench-$tag.txt" 2>&1
      echo "rc $?"; grep -E "^(decode|prefill) | forced " "$OUT/bench-$tag.txt" | sed 's/  */ /g'
    done
  fi
  if [[ $parts == *" timeline "* ]]; then
    # Session 15: the timeline probe of T=1 calls in a CUDA graph (bench/sparse_mla/mla_timeline.cu), once per value
    # of AB_VALUES with AB_VAR=value (else once); TL_HS (default 128,64).
    for r in "${runs[@]}"; do
      v=${r%%:*}; n=${r##*:}; tag=${v:+$v-}run$n
      stamp "timeline, run $n${v:+, $AB_VAR=$v}"
      # shellcheck disable=SC2086  # TL_EXTRA: more flags, split on purpose
      env ${v:+"$AB_VAR=$v"} timeout 120 "$B/glm5rt_bench_mla_timeline" --H "${TL_HS:-128,64}" ${TL_EXTRA:-} \
        --json "$OUT/timeline-$tag.json" > "$OUT/timeline-$tag.txt" 2>&1
      echo "rc $?"; cat "$OUT/timeline-$tag.txt"
    done
  fi
  if [[ $parts == *" model "* ]]; then
    # Whole model, decode batches with FP8 cache records (GLM-5 dims, 4 layers): variant 14 allowed (the default) and
    # off (GLM5RT_MLA_V14=0), two processes each, alternating; MODEL_BATCHES (default 8).
    for run in 1 2; do
      for v in 1 0; do
        stamp "model, GLM5RT_MLA_V14=$v, run $run"
        GLM5RT_MLA_V14=$v timeout 120 "$B/glm5rt-bench" --glm5-dims --layers 4 --dense-layers 1 \
          --batches "${MODEL_BATCHES:-8}" --context 8192 --prefill 0 --steps 20 --cache-dtype fp8 \
          --json "$OUT/model-v14$v-run$run.json" 2>&1 | grep -E "^decode|error"
      done
    done
  fi
  if [[ $parts == *" final "* ]]; then
    stamp "whole GPU test binary"
    gpu_tests_all
    stamp "benchmark of record"
    mla_record
  fi
  stamp done
} 2>&1 | tee "$OUT/log.txt"
tar -czf "$OUT/s13.tgz" -C "$OUT" --exclude=s13.tgz . 2>/dev/null
find "$OUT" -mindepth 1 -not -name s13.tgz -delete

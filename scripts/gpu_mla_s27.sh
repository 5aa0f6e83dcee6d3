#!/usr/bin/env bash
# Session 27's device calls (run on the accelerator machine from the repository root; bundles from
# scripts/pack_mla_bundle.sh): PARTS (default "tests paths copy range") picks
#   tests  the sparse MLA and multi-pool GPU tests as shipped (variant 16 automatic on sm_90 for FP8 at 8 heads per
#          CTA, 32 <= T <= 128), then a subset with GLM5RT_MLA_V16_COPY=1 and =2 (variant 16 gathering by cp.async,
#          or half by cp.async: it runs in every case's variant loop);
#   paths  bench/sparse_mla/gather_paths.cu: the gather of T=128 x 2048 records alone by bulk copies, cp.async, both
#          and 16-byte loads, in the kernels' shapes, from DRAM and from an L2-resident pool (JSON in $OUT);
#   copy   variant 16's producer by bulk copies / cp.async / both (GLM5RT_MLA_V16_COPY 0 / 1 / 2) against variant 7,
#          forced at split counts, FP8 T = 32 / 128 x H = 8 and the 1024 x 8 grid, RUNS rounds of alternating processes;
#   range  variants 7 and 16 (bulk copies) forced at T = 16 / 24 / 192 / 256 x H = 8 (where 16 is not automatic yet).
#   P=.carry/s27/c1/prebuilt COMMIT=<sha> OUT=$OUT bash scripts/gpu_mla_s27.sh
set -uo pipefail
source scripts/lib/device_prebuilt.sh
PARTS=${PARTS:-tests paths copy range}

if [[ " $PARTS " == *" tests "* ]]; then
  stamp "tests as shipped"
  timeout "${TESTS_S:-280}" "$B/glm5rt_gpu_tests" -tc="*sparse MLA*,*multi*pool*" > "$OUT/tests.txt" 2>&1
  echo "rc $?"; tail -n 3 "$OUT/tests.txt"; grep -E "ERROR|FAIL" "$OUT/tests.txt" | head -10
  for cp in ${TEST_COPIES:-1 2}; do
    stamp "tests GLM5RT_MLA_V16_COPY=$cp"
    GLM5RT_MLA_V16_COPY=$cp timeout 200 "$B/glm5rt_gpu_tests" \
      -tc="*every head count*,*top-k from 1*,*many query tokens*,*forced split*,*rising*" > "$OUT/tests-copy$cp.txt" 2>&1
    echo "rc $?"; tail -n 3 "$OUT/tests-copy$cp.txt"; grep -E "ERROR|FAIL" "$OUT/tests-copy$cp.txt" | head -10
  done
fi

if [[ " $PARTS " == *" paths "* ]]; then
  stamp "gather paths"
  timeout 240 "$B/glm5rt_bench_gather_paths" --json "$OUT/gather_paths.json" ${PATHS_ARGS:-} | tee "$OUT/gather_paths.txt"
  echo "rc ${PIPESTATUS[0]}"
fi

if [[ " $PARTS " == *" copy "* ]]; then
  for run in $(seq 1 "${RUNS:-2}"); do
    for cp in ${COPIES:-0 1 2}; do
      stamp "bench copy $cp run $run"
      GLM5RT_MLA_V16_COPY=$cp timeout 200 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats fp8 --variants 7 \
        --T ${COPY_T:-32,128} --H 8 --force-variants 16 --force-splits ${COPY_SPLITS:-2,4,8} --prefill-T 1024 \
        --prefill-H 8 --reps 9 > "$OUT/bench-copy$cp-r$run.txt" 2>&1
      grep -E "^(decode|prefill) |forced" "$OUT/bench-copy$cp-r$run.txt" | sed 's/  */ /g; s/ event .*//' |
        sed "s/^/copy=$cp run=$run /"
    done
  done | tee "$OUT/copy-log.txt"
fi

if [[ " $PARTS " == *" range "* ]]; then
  stamp "range"
  timeout 240 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats fp8 --variants 7 --T ${RANGE_T:-16,24,192,256} \
    --H 8 --force-variants 7,16 --force-splits ${RANGE_SPLITS:-1,2,3,4,6,8,16} --reps 9 > "$OUT/bench-range.txt" 2>&1
  echo "rc $?"
  grep -E "^(decode|prefill) |forced" "$OUT/bench-range.txt" | sed 's/  */ /g; s/ event .*//'
fi
stamp done

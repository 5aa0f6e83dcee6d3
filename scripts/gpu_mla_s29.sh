#!/usr/bin/env bash
# Session 29's device calls (run on the accelerator machine from the repository root; bundles from
# scripts/pack_mla_bundle.sh): PARTS (default "tests") picks
#   tests  the sparse MLA and multi-pool GPU tests as shipped (mla_tests_shipped; with 1c1546e's bundle every case's
#          variant loop also forced variant 17, variant 14's raw FP8 form); if they fail, nothing else runs;
#   raw    (needs a bundle of 1c1546e, which had the raw form: measured slower and removed) the automatic FP8 rows at
#          H = RAW_H (variant 14 where it runs) with GLM5RT_MLA_V14_RAW=1 (the raw form) and 0 (the in-place
#          conversion), RUNS rounds in alternating processes, decode T = RAW_T and prefill RAW_PT, then the bf16 rows
#          of the same shapes once (the ratio FP8 / bf16 in the same call);
#   f16    this bundle's benchmark against another benchmark binary (OLD_BENCH, below): the f16 rows' and the wide Q
#          loads' A / Bs;
#   record issue 6's benchmark of record from P (mla_record: P must carry the sm_120 objects, SM120=1), with
#          GLM5RT_MLA_V14_RAW=$RECORD_RAW where set (read by 1c1546e's launcher only).
#   P=.carry/s29/c7/prebuilt COMMIT=<sha> OUT=$OUT bash scripts/gpu_mla_s29.sh
# Everything written under $OUT comes back as one archive ($OUT/<name>.tgz).
set -uo pipefail
source scripts/lib/device_prebuilt.sh
PARTS=${PARTS:-tests}

if [[ " $PARTS " == *" tests "* ]]; then
  mla_tests_shipped "${TESTS_S:-320}" || PARTS="tests"  # a failing kernel is not timed
fi

bench_rows() {  # $1 formats, then the environment is the caller's
  timeout 240 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats "$1" --variants 0 --T "${RAW_T:-8,32,128,256}" \
    --H "${RAW_H:-64}" --prefill-T "${RAW_PT:-1024,4096}" --prefill-H "${RAW_H:-64}" --reps 9
}
if [[ " $PARTS " == *" raw "* ]]; then
  for run in $(seq 1 "${RUNS:-2}"); do
    for on in 1 0; do
      stamp "raw run $run GLM5RT_MLA_V14_RAW=$on"
      GLM5RT_MLA_V14_RAW=$on bench_rows fp8 > "$OUT/bench-raw$on-r$run.txt" 2>&1
      grep -E "^(decode|prefill) " "$OUT/bench-raw$on-r$run.txt" | sed 's/  */ /g; s/ v1 .*//' | sed "s/^/raw=$on run=$run /"
    done
  done | tee "$OUT/raw-log.txt"
  stamp "bf16 rows"
  bench_rows bf16 > "$OUT/bench-bf16.txt" 2>&1
  grep -E "^(decode|prefill) " "$OUT/bench-bf16.txt" | sed 's/  */ /g; s/ v1 .*//' | tee -a "$OUT/raw-log.txt"
fi

# f16: variant 14's FP8 form converting to f16 rows (this bundle) against the bf16 rows of 1c1546e's benchmark binary
# (OLD_BENCH: an xz file, GLM5RT_MLA_V14_RAW=0 there), RUNS rounds in alternating processes, FP8 rows at H = F16_H.
if [[ " $PARTS " == *" f16 "* ]]; then
  old=$OUT/../old_bench; xz -dc "${OLD_BENCH:?}" > "$old" && chmod +x "$old"
  f16_rows() {  # $1 binary
    timeout 240 "$1" --no-sweep --quick --formats fp8 --variants 0 --T "${F16_T:-8,32,128,256}" --H "${F16_H:-64,128}" \
      --prefill-T "${F16_PT:-1024,4096}" --prefill-H 64 --reps 9
  }
  for run in $(seq 1 "${RUNS:-3}"); do
    for which in new old; do
      stamp "f16 run $run $which"
      bin=$B/glm5rt_bench_sparse_mla; [ "$which" = old ] && bin=$old
      GLM5RT_MLA_V14_RAW=0 f16_rows "$bin" > "$OUT/bench-$which-r$run.txt" 2>&1
      grep -E "^(decode|prefill) " "$OUT/bench-$which-r$run.txt" | sed 's/  */ /g; s/ v1 .*//' | sed "s/^/$which run=$run /"
    done
  done | tee "$OUT/f16-log.txt"
fi

if [[ " $PARTS " == *" record "* ]]; then
  stamp "record"
  if [ -n "${RECORD_RAW:-}" ]; then export GLM5RT_MLA_V14_RAW=$RECORD_RAW; fi
  mla_record
fi
# At most 8 files come back from a device call: everything as one archive.
tar -czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")" && rm -rf "${OUT:?}" && mkdir -p "$OUT" && mv "$OUT.tgz" "$OUT/"
stamp "done"

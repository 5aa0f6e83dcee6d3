#!/usr/bin/env bash
# Session 30's device call: the closing checks of issue 6 on the shipped kernels (run on the accelerator machine
# from the repository root; bundle from scripts/pack_mla_bundle.sh with SM120=1). PARTS (default "all record anyh"):
#   all     the whole GPU test binary (every gpu-labelled case, not only the sparse MLA ones); if it fails, nothing
#           is timed;
#   record  issue 6's benchmark of record (mla_record: tests, benchmark, Triton baseline, ceilings, sm_120 report);
#   anyh    T=1 at every head count the interface takes (8, 16, 32, 64, 128), both record formats, automatic plans,
#           RUNS (default 3) processes: the "T=1, any H" target beyond the record's 64 / 16 / 8.
#   P=.carry/s30/c1/prebuilt COMMIT=<sha> OUT=$OUT bash scripts/gpu_mla_s30.sh
# Everything written under $OUT comes back as one archive ($OUT/<name>.tgz).
set -uo pipefail
source scripts/lib/device_prebuilt.sh
PARTS=${PARTS:-all record anyh}

if [[ " $PARTS " == *" all "* ]]; then
  stamp "the whole GPU test binary"
  gpu_tests_all
  grep -q "Status: SUCCESS" "$OUT/gpu-tests-summary.txt" || PARTS="all"  # a failing build is not timed
fi

if [[ " $PARTS " == *" record "* ]]; then
  stamp "record"
  mla_record
fi

if [[ " $PARTS " == *" anyh "* ]]; then
  for run in $(seq 1 "${RUNS:-3}"); do
    stamp "T=1 any H, run $run"
    timeout 240 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats bf16,fp8 --variants 0 --T 1 \
      --H 8,16,32,64,128 --reps 9 > "$OUT/anyh-r$run.txt" 2>&1
    grep -E "^decode " "$OUT/anyh-r$run.txt" | sed 's/  */ /g; s/ v1 .*//' | sed "s/^/run=$run /"
  done | tee "$OUT/anyh-log.txt"
fi
# At most 8 files come back from a device call: everything as one archive.
tar -czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")" && rm -rf "${OUT:?}" && mkdir -p "$OUT" && mv "$OUT.tgz" "$OUT/"
stamp "done"

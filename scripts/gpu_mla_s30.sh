#!/usr/bin/env bash
# Session 30's device calls: issue 6's record and checks, and the measurements behind that session's planner changes
# (run on the accelerator machine from the repository root; bundles from scripts/pack_mla_bundle.sh, with SM120=1 for
# the record). PARTS (default "tests record anyh"; call 1 ran "all record anyh", where "all" was the bundle's whole
# test binary, i.e. the same cases as "tests"):
#   tests   the sparse MLA and multi-pool GPU tests as shipped (mla_tests_shipped); if they fail, nothing is timed;
#   record  issue 6's benchmark of record (mla_record: tests, benchmark, Triton baseline, ceilings, sm_120 report);
#   anyh    T=1 at every head count the interface takes (8, 16, 32, 64, 128), both record formats, automatic plans,
#           RUNS (default 3) processes: the "T=1, any H" target beyond the record's 64 / 16 / 8.
#   kernels the automatic bf16 kernel beside variants 2, 5, 10 and 11 forced at its plan (the benchmark's columns),
#           RUNS processes, decode T = KT x H = KH and prefill KPT (none: no prefill) x 32 heads: which kernel each head
#           group size should run (call 1's record: at 32 heads per CTA variant 10 beat the automatic variant 11);
#   plans   PRUNS (default 1) plan sweeps (heads per CTA x splits x merge) of formats PF (bf16) at T = PT (1, 2, 4, 8) x
#           H = PH (32, 64, 128) with this bundle's kernel choices.
#   ab      this bundle's automatic plans and kernels against another benchmark binary's (OLD_BENCH: the binary or an
#           xz file of it; inside the bundle, one xz archive keeps the two binaries' common bytes once),
#           RUNS processes of each, alternating: decode T = AB_T x H = 8-128 and prefill 1024 x 32, both formats.
#   h32     FP8 records at 32 heads: GLM5RT_MLA_V16_H32 = 1 (two 16-head CTAs per token on variant 16) and 0 (one 32-head
#           CTA on variant 7), RUNS alternating processes, decode T = 32, 64, 128, 256 and prefill 1024 / 4096.
#   P=.carry/s30/c1/prebuilt COMMIT=<sha> OUT=$OUT bash scripts/gpu_mla_s30.sh
# Everything written under $OUT comes back as one archive ($OUT/<name>.tgz).
set -uo pipefail
source scripts/lib/device_prebuilt.sh
PARTS=${PARTS:-tests record anyh}

# One benchmark process: `bench <log> <prefix> <arguments...>` runs BIN (default the bundle's benchmark; BENCH_S
# seconds at most, default 300) into $OUT/<log>.txt and prints its decode / prefill / plan rows, runs of spaces
# squeezed and the per-variant columns cut (CUT set to empty keeps them), each prefixed by <prefix>.
bench() {
  local log=$OUT/$1.txt prefix=$2
  shift 2
  timeout "${BENCH_S:-300}" "${BIN:-$B/glm5rt_bench_sparse_mla}" "$@" > "$log" 2>&1
  grep -E "^(decode|prefill|plan) " "$log" | sed "s/  */ /g; ${CUT-s/ v1 .*//}" | sed "s/^/$prefix /"
}

if [[ " $PARTS " == *" tests "* ]]; then
  mla_tests_shipped "${TESTS_S:-320}" || PARTS="tests"  # a failing kernel is not timed
fi

if [[ " $PARTS " == *" ab "* ]]; then
  old=$(mktemp -d)/old_bench  # outside $OUT: the binary itself need not come back
  case "${OLD_BENCH:?}" in *.xz) xz -dc "$OLD_BENCH" > "$old" ;; *) cp "$OLD_BENCH" "$old" ;; esac; chmod +x "$old"
  for run in $(seq 1 "${RUNS:-3}"); do
    for which in new old; do
      stamp "ab run $run $which"
      bin=$B/glm5rt_bench_sparse_mla; [ "$which" = old ] && bin=$old
      BIN=$bin bench "ab-$which-r$run" "$which run=$run" --no-sweep --quick --formats bf16,fp8 --variants 0 \
        --T "${AB_T:-1,2,3,4,5,6,7,8,32,128}" --H 8,16,32,64,128 --prefill-T 1024 --prefill-H 32 --reps 9
    done
  done > "$OUT/ab-log.txt"
  echo "ab rows: $(grep -c . "$OUT/ab-log.txt")"
fi

if [[ " $PARTS " == *" h32 "* ]]; then
  for run in $(seq 1 "${RUNS:-3}"); do
    for on in 1 0; do
      stamp "h32 run $run GLM5RT_MLA_V16_H32=$on"
      GLM5RT_MLA_V16_H32=$on bench "h32-$on-r$run" "h32=$on run=$run" --no-sweep --quick --formats fp8 --variants 0 \
        --T 32,64,128,256 --H 32 --prefill-T 1024,4096 --prefill-H 32 --reps 9
    done
  done | tee "$OUT/h32-log.txt"
fi

if [[ " $PARTS " == *" record "* ]]; then
  stamp "record"
  mla_record
fi

if [[ " $PARTS " == *" anyh "* ]]; then
  for run in $(seq 1 "${RUNS:-3}"); do
    stamp "T=1 any H, run $run"
    BENCH_S=240 bench "anyh-r$run" "run=$run" --no-sweep --quick --formats bf16,fp8 --variants 0 --T 1 \
      --H 8,16,32,64,128 --reps 9
  done | tee "$OUT/anyh-log.txt"
fi
if [[ " $PARTS " == *" kernels "* ]]; then
  for run in $(seq 1 "${RUNS:-3}"); do
    stamp "kernels run $run"
    pre=(--prefill-T "${KPT:-1024,4096}" --prefill-H 32); [ "${KPT:-}" = none ] && pre=()
    CUT= bench "kernels-r$run" "run=$run" --no-sweep --quick --formats bf16 --variants 0,2,5,10,11 \
      --T "${KT:-2,4,8,32,128}" --H "${KH:-8,16,32,64,128}" "${pre[@]}" --reps 9
  done > "$OUT/kernels-log.txt"
  tail -n 40 "$OUT/kernels-log.txt"
fi

if [[ " $PARTS " == *" plans "* ]]; then
  for run in $(seq 1 "${PRUNS:-1}"); do
    stamp "plan sweep $run"
    bench "plans-r$run" "run=$run" --plan-sweep --formats "${PF:-bf16}" --T "${PT:-1,2,4,8}" --H "${PH:-32,64,128}" \
      --reps 9
  done
fi
# At most 8 files come back from a device call: everything as one archive.
tar -czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")" && rm -rf "${OUT:?}" && mkdir -p "$OUT" && mv "$OUT.tgz" "$OUT/"
stamp "done"

#!/usr/bin/env bash
# A / B of two builds of the sparse MLA benchmark on the same card in one device call (session 9): the sparse MLA
# tests of the bundle's test binary, then benchmark processes alternating the bundle's benchmark ("new") with a
# benchmark binary built from the base commit ("old", OLD_BENCH, xz-compressed or not), JSON per process into $OUT.
#
#   bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt && rm -rf .carry/final/prebuilt   (here)
#   mkdir -p .carry/old && xz -9c <old build>/bench/sparse_mla/glm5rt_bench_sparse_mla \
#     > .carry/old/glm5rt_bench_sparse_mla.xz                                                          (here)
#   OLD_BENCH=.carry/old/glm5rt_bench_sparse_mla.xz COMMIT=<hash> OUT=$OUT bash scripts/gpu_mla_builds_ab.sh
#                                                                   (device, carry .carry/final and .carry/old)
# Optional: ORDER (default "old new old new"), TEST_FILTER (default "*sparse MLA*"; empty = no tests), ARGS (the
# benchmark's flags, default below), NCU (a kernel-name regex: Nsight Compute's instruction and issue counters of
# those kernels in one extra "new" process run with NCU_ARGS).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
: "${OLD_BENCH:?set OLD_BENCH}"
source scripts/lib/device_prebuilt.sh
old=$OLD_BENCH
if [ "${old%.xz}" != "$old" ]; then
  xz -dc "$old" > "$OUT/old_bench" && chmod +x "$OUT/old_bench" && old=$OUT/old_bench
fi
ARGS=${ARGS:---no-sweep --quick --formats bf16,fp8 --T 1,8,32,128 --H 8,16,64 --variants 2,5,7 --prefill-T 4096 \
--prefill-H 64 --reps 9}
{
  if [ -n "${TEST_FILTER-*sparse MLA*}" ]; then
    stamp "tests -tc=${TEST_FILTER-*sparse MLA*}"
    timeout 300 "$B/glm5rt_gpu_tests" -tc="${TEST_FILTER-*sparse MLA*}" 2>&1 | tail -3
  fi
  n=0
  for w in ${ORDER:-old new old new}; do
    n=$((n + 1))
    bin=$B/glm5rt_bench_sparse_mla
    [ "$w" = old ] && bin=$old
    stamp "bench $w"
    # shellcheck disable=SC2086  # ARGS is a list of flags
    timeout 240 "$bin" $ARGS --commit "$COMMIT-$w" --json "$OUT/ab-$w-run$n.json" 2>&1 |
      grep -E "^(decode|prefill) |copy" | sed 's/  */ /g; s/ v1 0.00//; s/ v3 0.00//; s/ v6 0.00//'
  done
  if [ -n "${NCU:-}" ]; then
    stamp "ncu $NCU"
    metrics=smsp__inst_executed.sum,sm__cycles_active.avg,gpu__time_duration.sum
    metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__warps_eligible.avg.per_cycle_active
    # shellcheck disable=SC2086  # NCU_ARGS is a list of flags
    timeout 240 ncu --kernel-name "regex:$NCU" --launch-count 4 --metrics "$metrics" \
      "$B/glm5rt_bench_sparse_mla" ${NCU_ARGS:---no-sweep --quick --formats fp8 --T 128 --H 8 --reps 1} 2>&1 |
      grep -E "sparse_mla|inst_executed|cycles_active|issue_active|eligible|duration" | sed 's/  */ /g'
  fi
  stamp end
} 2>&1 | tee "$OUT/ab.txt"

#!/usr/bin/env bash
# Session 17's device calls: variant 14 taking work items in turn (persistent grid) against the binaries before it.
#   NEW=.carry/s17new/prebuilt OLD=.carry/s17old/prebuilt COMMIT=<sha> OUT=$OUT bash scripts/gpu_mla_s17.sh
# (carry both folders; bundles from scripts/prebuild_mla_sm90.sh). Parts (PARTS, default "tests topk bench"):
#   tests  the new bundle's sparse MLA and multi-pool GPU tests (TEST_TIMEOUT, default 300 s); on failure nothing is timed
#   testsx (session 21) the same for a third bundle X (carried too), timed as configuration "x" of CFGS (a fourth
#          bundle Y, untested, as "y")
#   topk   scripts/gpu_mla_topk.sh (T=128 x H=64,8, prefill 4096 x 64, both formats) for each configuration of CFGS
#          (default: the old bundle, the new one with GLM5RT_MLA_PERSIST=0, the new one), alternating, RUNS times
#          (TOPKS, default "512 2048")
#   bench  the decode benchmark (T = BENCH_TS x H = BENCH_HS, automatic plans) for the old and the new bundle
#   item   (session 19) the new bundle's persistent-item probe (glm5rt_bench_mla_item_timeline: prefill 31 x SMs tokens,
#          H=64, top-k 512 and 2048, both formats; ITEM_FLAGS adds options), once, after the tests
# Everything is packed into $OUT/s17.tgz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:?set OUT}
mkdir -p "$OUT"
parts=" ${PARTS:-tests topk bench} "
# The sparse MLA and multi-pool GPU tests of bundle $1 into $OUT/$2 (part $2); fails when they do.
bundle_tests() {
  P=$1 OUT=$OUT/$2 bash -c 'source scripts/lib/device_prebuilt.sh; stamp '"$2"';
    timeout "${TEST_TIMEOUT:-300}" "$B/glm5rt_gpu_tests" -tc="*sparse MLA*,*multi*pool*" > "$OUT/mla-tests.txt" 2>&1;
    rc=$?; echo "rc $rc"; tail -4 "$OUT/mla-tests.txt"; grep -E "ERROR|FAIL" "$OUT/mla-tests.txt" | head -20; exit $rc'
}
{
  if [[ $parts == *" tests "* ]]; then
    bundle_tests "$NEW" tests || { echo "=== tests failed: nothing timed"; parts=" "; }
  fi
  if [[ $parts == *" testsx "* ]]; then
    bundle_tests "$X" testsx || { echo "=== tests of X failed: nothing timed"; parts=" "; }
  fi
  if [[ $parts == *" item "* ]]; then
    echo "=== item probe"
    # shellcheck disable=SC2086  # ITEM_FLAGS: options
    P=$NEW OUT=$OUT/item bash -c 'source scripts/lib/device_prebuilt.sh;
      timeout 120 "$B/glm5rt_bench_mla_item_timeline" '"${ITEM_FLAGS:-}"' --commit "$COMMIT" --json "$OUT/item.json" > "$OUT/item.txt" 2>&1;
      echo "rc $?"; cat "$OUT/item.txt"'
  fi
  for n in $(seq 1 "${RUNS:-2}"); do
    if [[ $parts == *" topk "* ]]; then
      # CFGS: "old", or "new" with environment settings after a colon, comma-separated (e.g. new:GLM5RT_MLA_PERSIST=0).
      for cfg in ${CFGS:-old new:GLM5RT_MLA_PERSIST=0 new}; do
        echo "=== topk $cfg run $n"
        tag=$(echo "$cfg" | tr ':=,' '___')
        case ${cfg%%:*} in old) pp=$OLD ;; x) pp=$X ;; y) pp=$Y ;; *) pp=$NEW ;; esac
        envs=""; [[ $cfg == *:* ]] && envs=$(echo "${cfg#*:}" | tr ',' ' ')
        # shellcheck disable=SC2086  # the VAR=value words
        env $envs P=$pp OUT=$OUT/topk-$tag-$n TOPKS="${TOPKS:-512 2048}" bash scripts/gpu_mla_topk.sh | grep -vE "^(NVIDIA|\[)"
      done
    fi
    if [[ $parts == *" bench "* ]]; then
      for cfg in old new; do
        echo "=== bench $cfg run $n"
        if [ "$cfg" = old ]; then pp=$OLD; else pp=$NEW; fi
        P=$pp OUT=$OUT/bench-$cfg-$n bash -c 'source scripts/lib/device_prebuilt.sh;
          timeout 200 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats bf16,fp8 --variants 0 \
            --T "${BENCH_TS:-1,2,4,8,32,128}" --H "${BENCH_HS:-64,128}" --prefill-T 1024 --prefill-H 128 --reps 9 \
            --commit "$COMMIT" --json "$OUT/bench.json" > "$OUT/bench.txt" 2>&1;
          echo "rc $?"; grep -E "^(decode|prefill) " "$OUT/bench.txt" | sed "s/  */ /g; s/ v1 .*//"'
      done
    fi
  done
} 2>&1 | tee "$OUT/log.txt"
tar -czf "$OUT/s17.tgz" -C "$OUT" --exclude=s17.tgz . 2>/dev/null

#!/usr/bin/env bash
# Session 15's device calls: environment configurations of variant 10 (CONFIGS, e.g. "base staged chains2",
# each name a line of the case below), each running scripts/gpu_mla_s13.sh's PARTS (default "bench timeline") in
# $OUT/<config>-run<n>, alternating, RUNS times; first, unless PRE_PARTS is empty, PRE_PARTS (default "smoke tests")
# as the defaults are, then the sparse MLA tests once per configuration of TEST_CONFIGS. TL2_EXTRA: a second timeline run per configuration
# with these flags (e.g. "--hc 16 --splits 32"; TL2_HS, default 128). The other variables as gpu_mla_s13.sh.
#   P=.carry/s15/prebuilt COMMIT=<sha> OUT=$OUT bash scripts/gpu_mla_s15.sh          (device, carry .carry/s15)
# Everything is packed into $OUT/s15.tgz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:?set OUT}
env_of() {
  case $1 in
    base) echo "" ;;
    chains2) echo "GLM5RT_MLA_WSR_CHAINS=2" ;;
    staged) echo "GLM5RT_MLA_WSR_DIRECT=0" ;;
    *) echo "unknown configuration $1" >&2; exit 2 ;;
  esac
}
{
  if [ -n "${PRE_PARTS-smoke tests}" ]; then
    PARTS="${PRE_PARTS-smoke tests}" OUT="$OUT/pre-default" bash scripts/gpu_mla_s13.sh
    # The tests again with each configuration of TEST_CONFIGS (default: every switch that is off by default on); a
    # configuration whose tests fail (or hang: TEST_TIMEOUT) is not timed (session 15 call 4 lost 8 minutes to one).
    for c in ${TEST_CONFIGS:-staged chains2}; do
      out=$(PARTS=tests TEST_ENV="$(env_of "$c")" OUT="$OUT/pre-$c" bash scripts/gpu_mla_s13.sh)
      echo "$out"
      grep -q '^rc 0$' <<<"$out" || { skip="${skip:-} $c"; echo "=== $c failed its tests: not timed"; }
    done
  fi
  for n in $(seq 1 "${RUNS:-2}"); do
    for c in ${CONFIGS:-base staged}; do
      [[ " ${skip:-} " == *" $c "* ]] && continue
      echo "=== $c, run $n: $(env_of "$c")"
      # shellcheck disable=SC2046  # the configuration's VAR=value words
      env $(env_of "$c") PARTS="${PARTS:-bench timeline}" OUT="$OUT/$c-run$n" bash scripts/gpu_mla_s13.sh
      if [ -n "${TL2_EXTRA:-}" ]; then
        # shellcheck disable=SC2046
        env $(env_of "$c") PARTS=timeline TL_HS="${TL2_HS:-128}" TL_EXTRA="$TL2_EXTRA" OUT="$OUT/$c-run$n-tl2" \
          bash scripts/gpu_mla_s13.sh
      fi
    done
  done
} 2>&1 | tee "$OUT/log15.txt"
tar -czf "$OUT/s15.tgz" -C "$OUT" --exclude=s15.tgz . 2>/dev/null
find "$OUT" -mindepth 1 -not -name s15.tgz -delete

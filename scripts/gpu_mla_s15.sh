#!/usr/bin/env bash
# Session 15's device calls: environment configurations of variant 10 (CONFIGS, e.g. "base two direct twodirect",
# each name a line of the case below), each running scripts/gpu_mla_s13.sh's PARTS (default "bench timeline") in
# $OUT/<config>-run<n>, alternating, RUNS times; first, unless PRE_PARTS is empty, PRE_PARTS (default "smoke tests")
# as the defaults are, then the sparse MLA tests with every knob on. TL2_EXTRA: a second timeline run per configuration
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
    direct) echo "GLM5RT_MLA_WSR_DIRECT=1" ;;
    two) echo "GLM5RT_MLA_WSR_TWO=1" ;;
    twodirect) echo "GLM5RT_MLA_WSR_TWO=1 GLM5RT_MLA_WSR_DIRECT=1" ;;
    twochains2) echo "GLM5RT_MLA_WSR_TWO=1 GLM5RT_MLA_WSR_CHAINS=2" ;;
    *) echo "unknown configuration $1" >&2; exit 2 ;;
  esac
}
all_env="GLM5RT_MLA_WSR_TWO=1 GLM5RT_MLA_WSR_DIRECT=1"
{
  if [ -n "${PRE_PARTS-smoke tests}" ]; then
    PARTS="${PRE_PARTS-smoke tests}" OUT="$OUT/pre-default" bash scripts/gpu_mla_s13.sh
    PARTS=tests TEST_ENV="$all_env" OUT="$OUT/pre-knobs" bash scripts/gpu_mla_s13.sh
  fi
  for n in $(seq 1 "${RUNS:-2}"); do
    for c in ${CONFIGS:-base two direct twodirect}; do
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

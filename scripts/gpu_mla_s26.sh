#!/usr/bin/env bash
# Session 26's device call (run on the accelerator machine from the repository root; bundles from
# scripts/pack_mla_bundle.sh): PARTS (default "race l2") picks
#   race  racecheck of the warp-specialized kernels' ring (variants 5, 10, 11, 14: every kernel whose name starts
#         with sparse_mla_ws) on the small "every head count" test grids, with the bundle P and with the bundle PL
#         built with -DGLM5RT_MLA_RELEASE_ALL_LANES=1 (every consumer lane arrives on a slot's "empty" barrier): a
#         hazard that the second build does not report was racecheck not following __syncwarp's ordering;
#   l2    variant 7's rolling L2 prefetch (GLM5RT_MLA_V7_L2_LEAD steps ahead, GLM5RT_MLA_V7_L2_FORM) against none, in
#         alternating processes (RUNS rounds), FP8 decode T = 32 / 128 x H = 8 / 16 and the same grid at T=128 H=8
#         over one L2-resident pool (the benchmark's prefill row): the kernel's time without DRAM in it; first the
#         sparse MLA tests with the prefetch on.
#   P=.carry/s26/main/prebuilt PL=.carry/s26/lanes/prebuilt COMMIT=<sha> OUT=$OUT bash scripts/gpu_mla_s26.sh
# (The prefetch was measured slower everywhere in calls 1-2 and removed: its environment variables now change nothing;
# the code is in bench/results/s26/patches/s26-v7-l2-prefetch.patch, docs/PERFORMANCE.md "Session 26, calls 1-2".
# Likewise GLM5RT_MLA_V16_WARPS / _COPY of the v16 part: after call 3 only the three-warp bulk-copy form remains.)
set -uo pipefail
source scripts/lib/device_prebuilt.sh
PARTS=${PARTS:-race l2}
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

if [[ " $PARTS " == *" race "* ]]; then
  PL=${PL:?set PL}
  [ -d "$PL" ] || tar -xJf "$PL.tar.xz" -C "$(dirname "$PL")"
  "$CS" --help > "$OUT/cs-help.txt" 2>&1
  for build in main lanes; do
    bin=$B/glm5rt_gpu_tests
    [ "$build" = lanes ] && bin=$PWD/$PL/bin/glm5rt_gpu_tests
    stamp "racecheck $build"
    timeout "${RACE_S:-200}" "$CS" --tool racecheck --racecheck-report all --kernel-name kns=sparse_mla_ws \
      --print-limit 40 "$bin" -tc="*every head count*" > "$OUT/race-$build.txt" 2>&1
    echo "rc $?"
    grep -E "RACECHECK SUMMARY|ERROR SUMMARY|test cases|assertions" "$OUT/race-$build.txt" | head -6
    # Hazards by kind and kernel (the kernel names shortened to their template).
    grep -oE "(WAR|RAW|WAW) hazard|Potential (WAR|RAW|WAW) hazard|sparse_mla_ws[a-z]*_kernel<[^>]*>" \
      "$OUT/race-$build.txt" | sort | uniq -c | sort -rn | head -20
  done
fi

if [[ " $PARTS " == *" l2 "* ]]; then
  stamp "tests with the prefetch on"
  for form in 0 1; do
    GLM5RT_MLA_V7_L2_LEAD=4 GLM5RT_MLA_V7_L2_FORM=$form timeout 200 "$B/glm5rt_gpu_tests" \
      -tc="*every head count*,*top-k from 1*,*many query tokens*,*forced split*" > "$OUT/tests-l2-$form.txt" 2>&1
    echo "form $form rc $?"; tail -3 "$OUT/tests-l2-$form.txt"
  done
  stamp "A/B"
  for run in $(seq 1 "${RUNS:-3}"); do
    for c in ${CASES:-0:0 2:0 4:0 8:0 4:1 8:1}; do
      lead=${c%:*} form=${c#*:}
      GLM5RT_MLA_V7_L2_LEAD=$lead GLM5RT_MLA_V7_L2_FORM=$form timeout 120 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick \
        --formats fp8 --variants 0 --T 32,128 --H 8,16 --prefill-T 128 --prefill-H 8 --reps 9 > "$OUT/t.txt" 2>&1 ||
        echo "lead $lead form $form rc $?"
      grep -E "^(decode|prefill|gather) " "$OUT/t.txt" | sed 's/  */ /g' | sed "s/^/lead=$lead form=$form run=$run /"
    done
  done | tee "$OUT/l2-log.txt"
  python3 - "$OUT/l2-log.txt" > "$OUT/l2-summary.txt" <<'PY'
import re, statistics, sys, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"lead=(\d+) form=(\d) run=\d+ (decode|prefill) \S+ T= ?(\d+) H= ?(\d+) .*?auto ([\d.]+) us", line)
    if m:
        d[(m.group(3), int(m.group(4)), int(m.group(5)), int(m.group(1)), int(m.group(2)))].append(float(m.group(6)))
for k in sorted(d):
    v = d[k]
    base = d.get(k[:3] + (0, 0))
    ratio = statistics.median(base) / statistics.median(v) if base else float("nan")
    print("%-7s T=%-4d H=%-3d lead=%-2d form=%d  median %8.2f us  (min %8.2f max %8.2f n=%d)  %.3fx of lead 0"
          % (k + (statistics.median(v), min(v), max(v), len(v), ratio)))
PY
  cat "$OUT/l2-summary.txt"
  rm -f "$OUT/t.txt"
fi
if [[ " $PARTS " == *" v16 "* ]]; then
  # Variant 16 (FP8, 8 heads per CTA, a warp per step): the sparse MLA tests (it runs in every case's variant loop),
  # then forced against variant 7 at every split count, with 4 and 3 consumer warps (GLM5RT_MLA_V16_WARPS).
  stamp "tests"
  timeout "${TESTS_S:-280}" "$B/glm5rt_gpu_tests" -tc="*sparse MLA*,*multi*pool*" > "$OUT/tests-v16.txt" 2>&1
  echo "rc $?"; tail -n 3 "$OUT/tests-v16.txt"; grep -E "ERROR|FAIL" "$OUT/tests-v16.txt" | head -10
  GLM5RT_MLA_V16_WARPS=${ALT_WARPS:-4} GLM5RT_MLA_V16_COPY=${ALT_COPY:-1} timeout 200 "$B/glm5rt_gpu_tests" -tc="*every head count*,*top-k from 1*,*many query tokens*,*forced split*,*rising*" \
    > "$OUT/tests-v16-w3.txt" 2>&1
  echo "alternative form rc $?"; tail -n 3 "$OUT/tests-v16-w3.txt"; grep -E "ERROR|FAIL" "$OUT/tests-v16-w3.txt" | head -10
  # V16_CASES: warps:copy (GLM5RT_MLA_V16_WARPS, GLM5RT_MLA_V16_COPY: 1 bulk copies, 0 cp.async).
  for run in $(seq 1 "${RUNS:-2}"); do
    for c in ${V16_CASES:-4:1 3:1}; do
      w=${c%:*} cp=${c#*:}
      stamp "bench warps $w copy $cp run $run"
      GLM5RT_MLA_V16_WARPS=$w GLM5RT_MLA_V16_COPY=$cp timeout 200 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick \
        --formats fp8 --variants 7 --T ${V16_T:-32,128} --H ${V16_H:-8,16} --force-variants ${V16_FV:-7,16} \
        --force-splits ${V16_SPLITS:-1,2,3,4,6,8} --prefill-T ${V16_PT:-128,1024} --prefill-H 8 --reps 9 \
        > "$OUT/bench-w$w-c$cp-r$run.txt" 2>&1
      grep -E "^(decode|prefill) |forced" "$OUT/bench-w$w-c$cp-r$run.txt" | sed 's/  */ /g; s/ event .*//'
    done
  done
fi
stamp done

#!/usr/bin/env bash
# Session 27's device calls (run on the accelerator machine from the repository root; bundles from
# scripts/pack_mla_bundle.sh): PARTS (default "tests paths range") picks
#   tests  the sparse MLA and multi-pool GPU tests as shipped (SHIPPED=0: not), then TEST_FORMS' runs with
#          GLM5RT_MLA_V16_FORM set (FULL_FORM's the whole suite, the others a subset);
#   paths  bench/sparse_mla/gather_paths.cu: the gather of T=128 x 2048 records alone by bulk copies, cp.async, both
#          and 16-byte loads, in the kernels' shapes, from DRAM and from an L2-resident pool (JSON in $OUT);
#   form   variant 16 at each GLM5RT_MLA_V16_FORM of FORMS, forced at split counts, FP8 H=8 at T = FORM_T and
#          prefill-like grids over one L2-resident pool (FORM_PT), RUNS rounds, with the best split count per shape;
#   range  variants 7 and 16 forced at T = 16 / 24 / 192 / 256 x H = 8;
#   alt    another bundle's binaries (ALT, e.g. built with an experiment's macro) against P's: ALT's subset tests, then
#          the automatic FP8 H=8 rows of both, alternating processes;
#   final  the record's sparse MLA test cases and the automatic FP8 / bf16 rows at 8 heads (JSON), in little time;
#   record issue 6's benchmark of record from P (mla_record: P must carry the sm_120 objects, SM120=1).
#   P=.carry/s27/c1/prebuilt COMMIT=<sha> OUT=$OUT bash scripts/gpu_mla_s27.sh
# Everything written under $OUT comes back as one archive ($OUT/<name>.tgz).
# (Calls 1-5 measured variant 16's cp.async producer (GLM5RT_MLA_V16_COPY) and self-gathering forms 2-4 slower and
# removed them, bench/results/s27/patches/; GLM5RT_MLA_V16_FORM is now 0 (producer form) or not 0 (the default).)
set -uo pipefail
source scripts/lib/device_prebuilt.sh
PARTS=${PARTS:-tests paths range}

if [[ " $PARTS " == *" tests "* ]]; then
  if [ "${SHIPPED:-1}" = 1 ]; then
    stamp "tests as shipped"
    timeout "${TESTS_S:-280}" "$B/glm5rt_gpu_tests" -tc="*sparse MLA*,*multi*pool*" > "$OUT/tests.txt" 2>&1
    echo "rc $?"; tail -n 3 "$OUT/tests.txt"; grep -E "ERROR|FAIL" "$OUT/tests.txt" | head -10
  fi
  for f in ${TEST_FORMS:-}; do
    stamp "tests GLM5RT_MLA_V16_FORM=$f"
    tc="*sparse MLA*,*multi*pool*"
    [ "$f" != "${FULL_FORM:-1}" ] && tc="*every head count*,*top-k from 1*,*many query tokens*,*forced split*,*rising*"
    GLM5RT_MLA_V16_FORM=$f timeout "${TESTS_S:-280}" "$B/glm5rt_gpu_tests" -tc="$tc" > "$OUT/tests-form$f.txt" 2>&1
    echo "rc $?"; tail -n 3 "$OUT/tests-form$f.txt" | head -2; grep -E "ERROR|FAIL" "$OUT/tests-form$f.txt" | head -10
  done
fi

if [[ " $PARTS " == *" form "* ]]; then
  for run in $(seq 1 "${RUNS:-2}"); do
    for f in ${FORMS:-0 1 2}; do
      stamp "bench form $f run $run"
      GLM5RT_MLA_V16_FORM=$f timeout 200 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats fp8 --variants 7 \
        --T ${FORM_T:-16,32,128,256} --H 8 --force-variants 16 --force-splits ${FORM_SPLITS:-1,2,4,8,16} \
        --prefill-T ${FORM_PT:-128,1024} --prefill-H 8 --reps 9 > "$OUT/bench-form$f-r$run.txt" 2>&1
      grep -E "^(decode|prefill) |forced" "$OUT/bench-form$f-r$run.txt" | sed 's/  */ /g; s/ event .*//; s/ sets=.*auto/ auto/' |
        sed "s/^/form=$f run=$run /"
    done
  done > "$OUT/form-log.txt"
  # Best forced split count per (shape, form) and the automatic row, over the runs.
  python3 - "$OUT/form-log.txt" <<'PY'
import re, sys, collections
best, auto, pending = collections.defaultdict(list), collections.defaultdict(list), []
for line in open(sys.argv[1]):
    m = re.match(r"form=(\d) run=\d+\s+v16 T=(\d+) H=8 fp8 forced (\d+) splits: ([\d.]+)", line)
    if m:  # forced rows come before their shape's row, which names the phase
        pending.append((int(m.group(2)), int(m.group(1)), float(m.group(4)), int(m.group(3))))
        continue
    m = re.match(r"form=(\d) run=\d+ (decode|prefill) fp8 T= ?(\d+) H= ?8 splits= ?(\d+) auto ([\d.]+)", line)
    if m:
        auto[(m.group(2), int(m.group(3)), int(m.group(1)))].append(float(m.group(5)))
        for T, f, us, sp in pending:
            best[(m.group(2), T, f)].append((us, sp))
        pending = []
for k in sorted(best):
    v = sorted(best[k])
    print("v16 %-7s T=%-5d form %d  best %8.2f us at %2d splits  (next %s)" % (k + (v[0][0], v[0][1], v[1:3])))
for k in sorted(auto):
    print("auto %-7s T=%-5d form %d  %s" % (k + (auto[k],)))
PY
fi

if [[ " $PARTS " == *" alt "* ]]; then
  # Another bundle's binaries (ALT, e.g. built with an experiment's macro) against this one's, alternating processes:
  # the sparse MLA subset tests with ALT, then the automatic FP8 H=8 rows, RUNS rounds.
  ALT=${ALT:?set ALT}
  [ -d "$ALT" ] || tar -xJf "$ALT.tar.xz" -C "$(dirname "$ALT")"
  AB=$PWD/$ALT/bin
  src2=$(cat "$ALT/SOURCE_DIR")  # its tests' compiled-in source path -> this copy (as device_prebuilt.sh does for P)
  [ -e "$src2" ] || { mkdir -p "$(dirname "$src2")" && ln -sfn "$PWD" "$src2"; }
  stamp "alt tests"
  timeout 200 "$AB/glm5rt_gpu_tests" -tc="*every head count*,*top-k from 1*,*many query tokens*,*forced split*,*rising*" \
    > "$OUT/tests-alt.txt" 2>&1
  echo "rc $?"; tail -n 3 "$OUT/tests-alt.txt" | head -2; grep -E "ERROR|FAIL" "$OUT/tests-alt.txt" | head -10
  for run in $(seq 1 "${RUNS:-2}"); do
    for which in main alt; do
      bin=$B; [ "$which" = alt ] && bin=$AB
      timeout 200 "$bin/glm5rt_bench_sparse_mla" --no-sweep --quick --formats fp8 --variants 0 --T ${ALT_T:-32,128,256} \
        --H 8 --prefill-T ${ALT_PT:-128,1024} --prefill-H 8 --reps 9 > "$OUT/bench-$which-r$run.txt" 2>&1
      grep -E "^(decode|prefill) " "$OUT/bench-$which-r$run.txt" | sed 's/  */ /g; s/ event .*//; s/ sets=.*auto/ auto/' |
        sed "s/^/$which run=$run /"
    done
  done | tee "$OUT/alt-log.txt"
fi

if [[ " $PARTS " == *" final "* ]]; then
  # The shipped defaults in little device time: the record's sparse MLA test cases, then the automatic FP8 and bf16
  # rows at 8 heads (JSON in $OUT/final.json).
  stamp "final tests"
  timeout "${FINAL_TESTS_S:-90}" "$B/glm5rt_gpu_tests" -tc="sparse MLA*" > "$OUT/tests-final.txt" 2>&1
  echo "rc $?"; tail -n 3 "$OUT/tests-final.txt" | head -2; grep -E "ERROR|FAIL" "$OUT/tests-final.txt" | head -10
  stamp "final bench"
  timeout 120 "$B/glm5rt_bench_sparse_mla" --json "$OUT/final.json" --commit "$COMMIT" --no-sweep --quick --formats bf16,fp8 --variants 0 \
    --T ${FINAL_T:-32,64,128,192,256} --H 8 --prefill-T ${FINAL_PT:-1024,4096} --prefill-H 8 --reps 9 \
    > "$OUT/bench-final.txt" 2>&1
  echo "rc $?"
  grep -E "^(decode|prefill|gather) " "$OUT/bench-final.txt" | sed 's/  */ /g; s/ v1 .*//'
fi

if [[ " $PARTS " == *" record "* ]]; then
  stamp "record"
  mla_record
fi

if [[ " $PARTS " == *" paths "* ]]; then
  stamp "gather paths"
  timeout 240 "$B/glm5rt_bench_gather_paths" --json "$OUT/gather_paths.json" --commit "$COMMIT" ${PATHS_ARGS:-} | tee "$OUT/gather_paths.txt"
  echo "rc ${PIPESTATUS[0]}"
fi

if [[ " $PARTS " == *" range "* ]]; then
  stamp "range"
  timeout 240 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats fp8 --variants 7 --T ${RANGE_T:-16,24,192,256} \
    --H 8 --force-variants 7,16 --force-splits ${RANGE_SPLITS:-1,2,3,4,6,8,16} --reps 9 > "$OUT/bench-range.txt" 2>&1
  echo "rc $?"
  grep -E "^(decode|prefill) |forced" "$OUT/bench-range.txt" | sed 's/  */ /g; s/ event .*//'
fi
# At most 8 files come back from a device call: everything as one archive.
tar -czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")" && rm -rf "${OUT:?}" && mkdir -p "$OUT" && mv "$OUT.tgz" "$OUT/"
stamp done

#!/usr/bin/env bash
# Session 28's device calls (run on the accelerator machine from the repository root; bundles from
# scripts/pack_mla_bundle.sh): PARTS (default "tests h16") picks
#   tests  the sparse MLA and multi-pool GPU tests as shipped (every case's variant loop forces variant 16, so the
#          16-head form runs wherever a case has FP8 records and 16 heads per CTA); if they fail, nothing else runs;
#   h16    variant 16 forced at 16 heads per CTA at split counts H16_SPLITS, FP8 H=16 at T = H16_T and prefill-like
#          grids H16_PT, against the automatic rows with GLM5RT_MLA_V16_H16 on / 0 (variant 7), RUNS rounds in
#          alternating processes; then the best forced split count per shape over the runs;
#   final  the record's sparse MLA test cases and the automatic FP8 / bf16 rows at FINAL_H heads (JSON);
#   record issue 6's benchmark of record from P (mla_record: P must carry the sm_120 objects, SM120=1).
#   P=.carry/s28/c1/prebuilt COMMIT=<sha> OUT=$OUT bash scripts/gpu_mla_s28.sh
# Everything written under $OUT comes back as one archive ($OUT/<name>.tgz).
set -uo pipefail
source scripts/lib/device_prebuilt.sh
PARTS=${PARTS:-tests h16}

if [[ " $PARTS " == *" tests "* ]]; then
  mla_tests_shipped "${TESTS_S:-280}" || PARTS="tests"  # a failing kernel is not timed
fi

if [[ " $PARTS " == *" h16 "* ]]; then
  for run in $(seq 1 "${RUNS:-2}"); do
    for on in 1 0; do
      stamp "h16 run $run GLM5RT_MLA_V16_H16=$on"
      forced=(); [ "$on" = 1 ] && forced=(--force-variants 16 --force-splits "${H16_SPLITS:-1,2,4,8,16}")
      GLM5RT_MLA_V16_H16=$on timeout 240 "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --formats fp8 --variants 0 \
        --T "${H16_T:-32,64,128,256}" --H 16 "${forced[@]}" --prefill-T "${H16_PT:-1024,4096}" --prefill-H 16 --reps 9 \
        > "$OUT/bench-h16-on$on-r$run.txt" 2>&1
      grep -E "^(decode|prefill) |forced" "$OUT/bench-h16-on$on-r$run.txt" | sed 's/  */ /g; s/ event .*//; s/ sets=.*auto/ auto/' |
        sed "s/^/on=$on run=$run /"
    done
  done > "$OUT/h16-log.txt"
  python3 - "$OUT/h16-log.txt" <<'PY'
import re, sys, collections
best, auto, pending = collections.defaultdict(list), collections.defaultdict(list), []
for line in open(sys.argv[1]):
    m = re.match(r"on=1 run=\d+\s+v16 T=(\d+) H=16 fp8 forced (\d+) splits: ([\d.]+)", line)
    if m:  # forced rows come before their shape's row, which names the phase
        pending.append((int(m.group(1)), float(m.group(3)), int(m.group(2))))
        continue
    m = re.match(r"on=(\d) run=\d+ (decode|prefill) fp8 T= ?(\d+) H= ?16 splits= ?(\d+) auto ([\d.]+)", line)
    if m:
        auto[(m.group(2), int(m.group(3)), "v16" if m.group(1) == "1" else "v7")].append((float(m.group(5)), int(m.group(4))))
        for T, us, sp in pending:
            best[(m.group(2), T)].append((us, sp))
        pending = []
for k in sorted(best):
    v = sorted(best[k])
    print("v16 forced %-7s T=%-5d best %8.2f us at %2d splits  (next %s)" % (k + (v[0][0], v[0][1], v[1:3])))
for k in sorted(auto):
    print("auto %-7s T=%-5d %s  %s" % (k + (auto[k],)))
PY
fi

if [[ " $PARTS " == *" final "* ]]; then
  stamp "final tests"
  timeout "${FINAL_TESTS_S:-90}" "$B/glm5rt_gpu_tests" -tc="sparse MLA*" > "$OUT/tests-final.txt" 2>&1
  echo "rc $?"; tail -n 3 "$OUT/tests-final.txt" | head -2; grep -E "ERROR|FAIL" "$OUT/tests-final.txt" | head -10
  stamp "final bench"
  timeout 150 "$B/glm5rt_bench_sparse_mla" --json "$OUT/final.json" --commit "$COMMIT" --no-sweep --quick --formats bf16,fp8 \
    --variants 0 --T ${FINAL_T:-32,64,128,256} --H ${FINAL_H:-8,16} --prefill-T ${FINAL_PT:-1024,4096} \
    --prefill-H ${FINAL_H:-8,16} --reps 9 > "$OUT/bench-final.txt" 2>&1
  echo "rc $?"
  grep -E "^(decode|prefill|gather) " "$OUT/bench-final.txt" | sed 's/  */ /g; s/ v1 .*//'
fi

if [[ " $PARTS " == *" record "* ]]; then
  stamp "record"
  mla_record
fi
# At most 8 files come back from a device call: everything as one archive.
tar -czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")" && rm -rf "${OUT:?}" && mkdir -p "$OUT" && mv "$OUT.tgz" "$OUT/"
stamp done

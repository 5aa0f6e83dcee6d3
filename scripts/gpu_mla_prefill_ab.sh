#!/usr/bin/env bash
# Session 25: prefill's single-call (event) figure at the card's boost clock, for launcher choices that only an
# environment variable or the token count tells apart (the tail launch, its early start), as alternating processes of
# one benchmark binary, so that each case sees the same card state. A process's single calls come first after its
# warm-up and run at the boost clock; its graph figure runs under the H200's 700 W cap (docs/PERFORMANCE.md "Session
# 24"), so the event figure is the one to compare and the clock after each is printed beside it.
#   BENCH=<dir>/bin/glm5rt_bench_sparse_mla CASES="early:4096 late:4096:GLM5RT_MLA_TAIL_EARLY=0 t4092:4092" RUNS=8 \
#     OUT=$OUT bash scripts/gpu_mla_prefill_ab.sh                                               (device)
# A case is label:T[:VAR=value[,VAR=value...][:binary]] (the binary, default BENCH, for builds timed against each
# other: e.g. x24:4096::.carry/s25/var/x24a/bin/glm5rt_bench_sparse_mla). $OUT/log.txt: every line; $OUT/summary.txt:
# per case the medians of the event and graph figures, TFLOP/s of the event median, and the clocks.
set -uo pipefail
BENCH=${BENCH:-}
OUT=${OUT:?set OUT}
mkdir -p "$OUT"
for run in $(seq 1 "${RUNS:-8}"); do
  for c in ${CASES:?set CASES}; do
    IFS=: read -r label T envs bin <<< "$c"
    IFS=, read -r -a ev <<< "${envs:-}"
    bin=${bin:-$BENCH}
    [ -n "$bin" ] || { echo "$label: no binary (set BENCH)"; continue; }
    env "${ev[@]}" timeout 120 "$bin" --no-sweep --quick --formats bf16 --variants 0 --T 1 --H 64 \
      --prefill-T "$T" --prefill-H 64 --reps 9 > "$OUT/t.txt" 2>&1 || { echo "$label rc $?"; tail -3 "$OUT/t.txt"; }
    grep -E "^prefill " "$OUT/t.txt" | sed 's/  */ /g; s/ v1 .*//' | sed "s/^/$label run=$run /"
  done
done | tee "$OUT/log.txt"
rm -f "$OUT/t.txt"
python3 - "$OUT/log.txt" > "$OUT/summary.txt" <<'PY'
import re, statistics, sys, collections
d = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) run=\d+ prefill \S+ T= ?(\d+) H= ?(\d+) .*? auto ([\d.]+) us event ([\d.]+) us"
                 r".*?clock ([\d.]+) / ([\d.]+) MHz", line)
    if not m:
        continue
    c = d[(m.group(1), int(m.group(2)), int(m.group(3)))]
    for k, i in (("graph", 4), ("event", 5), ("mhz_event", 6), ("mhz_graph", 7)):
        c[k].append(float(m.group(i)))
for (label, T, H), c in d.items():
    ev = statistics.median(c["event"])
    flops = 2.0 * T * H * 2048 * (576 + 512)
    print("%-10s T=%d H=%d event median %8.1f us (%5.1f TFLOP/s; min %8.1f max %8.1f) at %4.0f MHz | graph median "
          "%8.1f us at %4.0f MHz | n=%d" % (label, T, H, ev, flops / ev * 1e-6, min(c["event"]), max(c["event"]),
          statistics.median(c["mhz_event"]), statistics.median(c["graph"]), statistics.median(c["mhz_graph"]),
          len(c["event"])))
PY
cat "$OUT/summary.txt"

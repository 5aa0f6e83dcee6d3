#!/usr/bin/env bash
# MoE round 6 on the device, one call: scripts/gpu_moe.sh (kernels preset, -j16, this family's GPU tests,
# the bench at T = 1, 8, 64 (GLM5RT_BENCH_TOKENS) with JSON) without the sm_120 ptxas pass (checked on the build
# machine), then a compact summary for the call's output tail: test totals, the T=1 timelines of the rows
# that matter (where the step's time goes, from MoeParams::debug_stamps), and the table rows.
#   OUT=/tmp/out GLM5RT_COMMIT=<sha> scripts/gpu_moe_round6.sh
# Timeline rows to print: GLM5RT_TIMELINES="default:1 old:1 default:8" (label:tokens).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out-moe}
mkdir -p "$OUT"
GLM5RT_SKIP_PTXAS=1 GLM5RT_BENCH_TOKENS=${GLM5RT_BENCH_TOKENS:-1,8,64} OUT="$OUT" bash scripts/gpu_moe.sh >/dev/null 2>&1
sleep 1
echo "== build: $(grep -E '^== (built|BUILD|using)' "$OUT/log" | head -n 1)"
grep -E "^\[doctest\] (test cases|assertions):|FAILED|ERROR" "$OUT/tests.txt" 2>/dev/null | head -n 20
grep -E "^device:|^copy bandwidth" "$OUT/bench.txt" 2>/dev/null
for label in ${GLM5RT_TIMELINES:-default:1 fast-sel:1 slow-sel:1 default:8 fast-sel:8 slow-sel:8}; do
  awk -v want="timeline ${label%%:*} T=${label##*:} " 'index($0, want) == 1 { on = 1; print; next } on && /^  / { print; next } { on = 0 }' \
    "$OUT/bench.txt" 2>/dev/null
done
echo "== table (ms; b2b = 20 graph replays back to back / 20; layers8 = one graph of 8 layers / 8)"
sed -n '/^config /,$p' "$OUT/bench.txt" 2>/dev/null
grep -E "^== (gpu tests exit|benchmark exit)" "$OUT/log"

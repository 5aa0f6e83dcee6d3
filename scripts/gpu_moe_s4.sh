#!/usr/bin/env bash
# MoE session 4 (issue 8, the T=1 target) on the device, one call: build the `kernels` preset for sm_90 with
# -j16 (~20 s), run the benchmark rows that compare the previous and the new decode-GEMM paths in one process
# (GLM5RT_BENCH_TOKENS, default 1,8; GLM5RT_BENCH_ROWS, default the session-4 list below) with JSON, then this
# family's GPU tests (fp8 GEMM, router, permutation, MoE; old and new paths), and print a compact summary last.
#   OUT=/tmp/out GLM5RT_COMMIT=<sha> scripts/gpu_moe_s4.sh
# Timelines printed: GLM5RT_TIMELINES="default:1 lines:1" (label:tokens).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out-moe}
mkdir -p "$OUT"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
commit=${GLM5RT_COMMIT:-$(cat COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}
rows=${GLM5RT_BENCH_ROWS:-default,shared-strm,s4-base,s4-base-shstrm,gu-w2,gu-lines,dn-lines,lines,gu-w2-lines,lines-fc,gu-w2-shstrm,fuse-comb,unfused,perm-2p}
{
  echo "== gpu_moe_s4.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $commit"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>/dev/null
  t0=$(date +%s)
  if cmake --preset kernels -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/configure.txt" 2>&1 &&
     cmake --build build-kernels -j 16 --target glm5rt_gpu_tests glm5rt_bench_moe >"$OUT/build.txt" 2>&1; then
    echo "== built in $(( $(date +%s) - t0 )) s"
  else
    echo "== BUILD FAILED"; tail -n 30 "$OUT/build.txt" "$OUT/configure.txt"; exit 1
  fi
  timeout "${GLM5RT_BENCH_TIMEOUT:-120}" build-kernels/bench/moe/glm5rt_bench_moe --json "$OUT/moe-h200-s4.json" \
    --commit "$commit" --tokens "${GLM5RT_BENCH_TOKENS:-1,8}" --rows "$rows" >"$OUT/bench.txt" 2>&1
  echo "== benchmark exit code $?"
  timeout "${GLM5RT_TEST_TIMEOUT:-110}" build-kernels/tests/glm5rt_gpu_tests --duration=true \
    -tc="${GLM5RT_TEST_FILTER:-*fp8*,*router*,*permutation*,*MoE*}" >"$OUT/tests.txt" 2>&1
  echo "== gpu tests exit code $?"
} >"$OUT/log" 2>&1
cat "$OUT/log"
grep -E "^\[doctest\] (test cases|assertions):|FAILED|ERROR|error:" "$OUT/tests.txt" 2>/dev/null | head -n 20
grep -E "^device:|^copy bandwidth" "$OUT/bench.txt" 2>/dev/null
for label in ${GLM5RT_TIMELINES:-default:1 lines:1 gu-w2-lines:1 lines:8}; do
  awk -v want="timeline ${label%%:*} T=${label##*:} " 'index($0, want) == 1 { on = 1; print; next } on && /^  / { print; next } { on = 0 }' \
    "$OUT/bench.txt" 2>/dev/null
done
echo "== table (ms; b2b = 20 graph replays back to back / 20; layers8 = one graph of 8 layers / 8)"
sed -n '/^config /,$p' "$OUT/bench.txt" 2>/dev/null | cut -c1-110

#!/usr/bin/env bash
# MoE session 4, line copies beside the second stream, second device call: the illegal instruction of 0844c2c
# reproduced with that commit's benchmark (prebuilt, $BIN/glm5rt_bench_moe_0844c2c, row lines-shstrm: there the
# shared expert's own GEMMs on the second stream took the line copies too) and under compute-sanitizer memcheck,
# then the same split on the current code (MoeParams::shared_line_copies / GLM5RT_MOE_SHARED_LINES: bit 0 the
# shared gate_up GEMM, bit 1 the shared down GEMM), the GEMM-level chain with the second stream's dense GEMM
# using line copies, and the SASS of the dense line kernel. Each case in its own process.
#   OUT=/tmp/out BIN=prebuilt-moe/bin scripts/gpu_moe_lines2.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out-moe2}
BIN=${BIN:-prebuilt-moe/bin}
A=$OUT/all
mkdir -p "$A"
[ -d /usr/local/cuda/bin ] && export PATH=$PATH:/usr/local/cuda/bin
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
T0=$(date +%s)
S=$OUT/summary.txt
say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$S"; }
BUDGET=${GLM5RT_BUDGET_S:-100}
cap() { local left=$(( BUDGET - ($(date +%s) - T0) - 5 )); [ "$left" -lt 1 ] && left=1; [ "$1" -lt "$left" ] && echo "$1" || echo "$left"; }
run_case() {  # name, timeout, command...
  local name=$1 to=$(cap "$2"); shift 2
  timeout "$to" "$@" >"$A/$name.txt" 2>&1
  local rc=$?
  say "$name rc=$rc $(grep -m1 -iE "illegal|error|FAILED|cudaError" "$A/$name.txt" | cut -c1-160)"
  grep -E "MESSAGE: line copies|^row |lines-shstrm +1 " "$A/$name.txt" | sed 's/^.*MESSAGE: /  /' | cut -c1-150 | tee -a "$S"
  return $rc
}
SAN=$(command -v compute-sanitizer)
old=$BIN/glm5rt_bench_moe_0844c2c
bench=$BIN/glm5rt_bench_moe
tests=$BIN/glm5rt_gpu_tests
B1=(--no-gemm-ceilings --tokens 1)
say "gpu_moe_lines2.sh $(date -u +%Y-%m-%dT%H:%M:%SZ)"
run_case old-lines-shstrm 25 "$old" "${B1[@]}" --rows lines-shstrm
run_case old-lines-shstrm-san 40 "$SAN" --tool memcheck --show-backtrace device "$old" "${B1[@]}" --rows lines-shstrm
grep -B3 -A14 -m2 -E "Illegal|Invalid|Error|error" "$A/old-lines-shstrm-san.txt" | head -50 | tee -a "$S"
run_case cur-lines-shstrm-shl 20 "$bench" "${B1[@]}" --rows lines-shstrm-shl
GLM5RT_MOE_SHARED_LINES=1 run_case cur-shl-gateup 20 "$bench" "${B1[@]}" --rows lines-shstrm-shl
GLM5RT_MOE_SHARED_LINES=2 run_case cur-shl-down 20 "$bench" "${B1[@]}" --rows lines-shstrm-shl
GLM5RT_MOE_SHARED_LINES=3 run_case cur-shl-only 20 "$bench" "${B1[@]}" --rows shared-strm
run_case gemm-chain-side 25 "$tests" -tc="fp8 gemm early-start chain*second stream"
for f in $(cuobjdump -symbols "$tests" 2>/dev/null | grep -o '_ZN6glm5rt7kernels6detail28fp8_gemm_decode_async_kernelILi[56]ELb0ELb0ELb0ELi4ELb1EEEvNS0_13Fp8GemmParamsE' | sort -u); do
  cuobjdump -sass -fun "$f" "$tests" >"$A/sass-$f.txt" 2>&1
done
tar -czf "$OUT/all.tgz" -C "$OUT" all && rm -rf "$A"
say done
cat "$S"

#!/usr/bin/env bash
# MoE session 4, whole-line weight copies (issue 8): one device call from binaries prebuilt on the development
# machine (scripts/prebuild_moe_sm90.sh, sm_90, -lineinfo; carried in $BIN or unpacked from $BIN.tar.xz).
#  1. the GEMM-level chain (line copies with the evict_first hint started early after a PDL predecessor, one
#     stream / beside a second stream) and the MoE bench rows with line copies beside the second stream, each in
#     its own process (the form that stopped with an illegal instruction at 0844c2c); compute-sanitizer memcheck
#     on the first that fails, else on the lines-shstrm row (GLM5RT_SANITIZE=0: none); synccheck at the end;
#  2. the benchmark rows that compare the defaults and the line copies in one process (JSON);
#  3. this family's GPU tests (fp8 GEMM, router, permutation, MoE), the T=1/2/6 MoE block case in its own process;
#  4. the SASS of the line kernels (cuobjdump), everything else packed into $OUT/all.tgz; a summary printed last.
#   OUT=/tmp/out GLM5RT_COMMIT=<sha> BIN=prebuilt-moe/bin scripts/gpu_moe_lines.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out-moe}
BIN=${BIN:-prebuilt-moe/bin}
mkdir -p "$OUT/all"
A=$OUT/all
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
[ -d /usr/local/cuda/bin ] && export PATH=$PATH:/usr/local/cuda/bin
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
[ -f "$BIN.tar.xz" ] && [ ! -x "$BIN/glm5rt_gpu_tests" ] && tar -xJf "$BIN.tar.xz" -C "$(dirname "$BIN")"
commit=${GLM5RT_COMMIT:-unknown}
T0=$(date +%s)
S=$OUT/summary.txt
say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$S"; }
tests=$BIN/glm5rt_gpu_tests
bench=$BIN/glm5rt_bench_moe
say "gpu_moe_lines.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $commit"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | tee -a "$S"
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
say "compute-sanitizer: ${SAN:-none}; cuobjdump: $(command -v cuobjdump || echo none)"

# 1. Diagnosis, one process per case (a sticky error ends only its own process).
BUDGET=${GLM5RT_BUDGET_S:-165}  # whole script; each step's timeout is cut to what is left
cap() { local left=$(( BUDGET - ($(date +%s) - T0) - 8 )); [ "$left" -lt 1 ] && left=1; [ "$1" -lt "$left" ] && echo "$1" || echo "$left"; }
run_case() {  # name, timeout, command...
  local name=$1 to=$(cap "$2"); shift 2
  if [ "$to" -lt 5 ]; then say "$name skipped (out of time)"; return 124; fi
  timeout "$to" "$@" >"$A/$name.txt" 2>&1
  local rc=$?
  local why=$(grep -m1 -iE "illegal|error|FAILED|cudaError" "$A/$name.txt" | cut -c1-160)
  say "$name rc=$rc ${why}"
  grep -E "MESSAGE: line copies|^row " "$A/$name.txt" | sed 's/^.*MESSAGE: /  /' | tee -a "$S"
  return $rc
}
export GLM5RT_TEST_CHAIN_ITERS=8
run_case gemm-chain-1strm 25 "$tests" -tc="fp8 gemm early-start chain*one stream"
run_case gemm-chain-side 25 "$tests" -tc="fp8 gemm early-start chain*second stream"
gemm_side_rc=$?
B1=(--no-gemm-ceilings --tokens 1)
# Line copies beside the second stream, each row in its own process (the form that failed at 0844c2c).
for row in lines-shstrm gu-lines-shstrm dn-lines-shstrm; do
  run_case "bench-$row" 20 "$bench" "${B1[@]}" --rows "$row"
done
if [ -n "$SAN" ] && [ "${GLM5RT_SANITIZE:-1}" = 1 ]; then
  # memcheck reports a device exception with the kernel, the PC and (with -lineinfo) the source line.
  if [ $gemm_side_rc -ne 0 ]; then
    GLM5RT_TEST_CHAIN_ITERS=3 run_case san-memcheck 40 "$SAN" --tool memcheck --show-backtrace device \
      "$tests" -tc="fp8 gemm early-start chain*second stream"
  else
    run_case san-memcheck 40 "$SAN" --tool memcheck --show-backtrace device "$bench" "${B1[@]}" --rows lines-shstrm
  fi
  grep -B2 -A12 -m3 -iE "illegal|Invalid|error" "$A/san-memcheck.txt" | head -60 | tee -a "$S"
fi

# 2. Timing: defaults against the line copies in one process (rows print as they finish).
say "bench"
timeout "$(cap 80)" "$bench" --json "$OUT/moe-lines.json" --commit "$commit" --tokens 1,8 \
  --rows "${GLM5RT_BENCH_ROWS:-default,s4-base,shared-strm,s4-base-shstrm,gu-lines,dn-lines,lines,gu-w2-lines,lines-fc,lines-shstrm}" \
  >"$OUT/bench.txt" 2>&1
say "bench rc=$?"

# 3. Tests: everything of this family but the MoE decode case and the diagnosis chain, then the MoE decode case.
timeout "$(cap 70)" "$tests" --duration=true -tc="*fp8*,*router*,*permutation*,*MoE*" \
  -tce="MoE block at GLM-5 size*,fp8 gemm early-start chain*" >"$A/tests-main.txt" 2>&1
say "tests (main) rc=$? $(grep -E '^\[doctest\] (test cases|assertions)' "$A/tests-main.txt" | tr '\n' ' ')"
timeout "$(cap 50)" "$tests" --duration=true -tc="MoE block at GLM-5 size*" >"$A/tests-moe-decode.txt" 2>&1
say "tests (MoE decode T=6,1,2) rc=$? $(grep -E '^\[doctest\] (test cases|assertions)' "$A/tests-moe-decode.txt" | tr '\n' ' ')"
grep -E "FAILED|ERROR|line copies beside|second stream:" "$A/tests-main.txt" "$A/tests-moe-decode.txt" | cut -c1-220 | head -30 | tee -a "$S"

if [ -n "$SAN" ]; then
  GLM5RT_TEST_CHAIN_ITERS=1 run_case san-synccheck 30 "$SAN" --tool synccheck \
    "$tests" -tc="fp8 gemm early-start chain*one stream"
  grep -m5 -iE "ERROR SUMMARY|hazard|Barrier|invalid" "$A/san-synccheck.txt" | tee -a "$S"
fi

# 4. SASS of the line kernels (plain depth 4 and 3, 4 warps) for the record.
if command -v cuobjdump >/dev/null; then
  for f in $(cuobjdump -symbols "$tests" 2>/dev/null | grep -o '_ZN6glm5rt7kernels6detail28fp8_gemm_decode_async_kernelILi[34]ELb0ELb0ELb0ELi4ELb[01]EEEvNS0_13Fp8GemmParamsE' | sort -u); do
    cuobjdump -sass -fun "$f" "$tests" >"$A/sass-$f.txt" 2>&1
  done
fi
tar -czf "$OUT/all.tgz" -C "$OUT" all && rm -rf "$A"
say "done"
echo "== bench table"
sed -n '/^config /,$p' "$OUT/bench.txt" | cut -c1-120
grep -E "^copy bandwidth" "$OUT/bench.txt"
echo "== summary"
cat "$S"

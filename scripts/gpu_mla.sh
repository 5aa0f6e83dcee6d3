#!/usr/bin/env bash
# Sparse MLA on the accelerator machine, in one go: build (kernels preset), GPU tests, the sm_120 resource
# report and SASS check, the benchmark, the Triton baseline with the machine's ceilings, and the summary
# table (printed last). Everything lands in $OUT (default ./out-mla): log, JSON, ptxas and SASS reports.
#
#   scripts/gpu_mla.sh                 # ARCHS=90 (run on the H200); ARCHS="80;90;120" for a full build
#   TRITON=0 scripts/gpu_mla.sh        # skip the Triton baseline; take it and the ceilings from the committed
#                                      # bench/results/sparse_mla-h200.json (saves ~60 s of device time)
#   BENCH_ARGS=--no-sweep scripts/gpu_mla.sh   # extra benchmark flags (--no-sweep: no split sweep)
#   PREBUILT=dir scripts/gpu_mla.sh    # use binaries built elsewhere with ARCHS=90 (dir holds glm5rt_gpu_tests,
#                                      # glm5rt_bench_sparse_mla, optionally sm120_*.o + ptxas_sm120.txt, else
#                                      # those are compiled here); falls back to building here when the binaries
#                                      # do not start (saves the build's device time)
# Each step continues past a failure of the previous one, so a failing test still leaves benchmark numbers.
set -x
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/out-mla}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log") 2>&1
ARCHS=${ARCHS:-90}
BUILD=${BUILD:-$ROOT/build-kernels-gpu}
JOBS=${JOBS:-$(nproc)}
# A copy sent to the device has no .git of its own; the sender writes the commit into GIT_COMMIT.
if [ -f "$ROOT/GIT_COMMIT" ]; then COMMIT=$(cat "$ROOT/GIT_COMMIT"); else COMMIT=$(git -C "$ROOT" rev-parse --verify -q HEAD || echo unknown); fi
status=0

date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true
nvcc --version | tail -2

TEST_BIN="$BUILD/tests/glm5rt_gpu_tests"
BENCH_BIN="$BUILD/bench/sparse_mla/glm5rt_bench_sparse_mla"
source scripts/lib/mla_units.sh  # MLA_TUS, MLA_SM120_FLAGS
# sm_120 resource report and SASS of every attention translation unit, in the background (here, or taken from
# PREBUILT when it has them).
build_sm120() {
  mkdir -p "$BUILD"
  (
    for f in $MLA_TUS; do
      # shellcheck disable=SC2086,SC2046  # the flags: words
      nvcc $MLA_SM120_FLAGS $(mla_unit_flags "$f") -I"$ROOT" -c "kernels/attention/$f.cu" -o "$BUILD/sm120_$f.o" &
    done
    wait
  ) >"$OUT/ptxas_sm120.txt" 2>&1 &
  sm120_pid=$!
}
sm120_pid=""
if [ -n "${PREBUILT:-}" ] && "$PREBUILT/glm5rt_gpu_tests" -ltc >/dev/null 2>&1; then
  echo "using the prebuilt binaries in $PREBUILT (built elsewhere from the same tree)"
  TEST_BIN="$PREBUILT/glm5rt_gpu_tests"
  BENCH_BIN="$PREBUILT/glm5rt_bench_sparse_mla"
  mkdir -p "$BUILD"
  if [ -f "$PREBUILT/sm120_sparse_mla.o" ]; then
    cp "$PREBUILT"/sm120_*.o "$BUILD"/
    cp "$PREBUILT/ptxas_sm120.txt" "$OUT/ptxas_sm120.txt"
  else
    build_sm120
  fi
else
  # 1. Build the kernels, the GPU tests and the benchmark.
  cmake --preset kernels -B "$BUILD" -DCMAKE_CUDA_ARCHITECTURES="$ARCHS" 2>&1 | tail -5 || status=1
  cmake --build "$BUILD" -j"$JOBS" --target glm5rt_gpu_tests glm5rt_bench_sparse_mla 2>&1 | tail -30 || status=1
  # 2. sm_120 (while the tests run).
  build_sm120
fi

# 3. GPU tests (correctness against the float32 CPU reference).
timeout ${TEST_TIMEOUT:-60} "$TEST_BIN" -tc="sparse MLA*" >"$OUT/tests.txt" 2>&1
test_rc=$?
tail -45 "$OUT/tests.txt"
echo "gpu tests exit code: $test_rc"
[ "$test_rc" = 0 ] || status=1

# 4. Benchmark (ours), then the Triton baseline and the ceilings.
timeout ${BENCH_TIMEOUT:-90} "$BENCH_BIN" --json "$OUT/ours.json" ${BENCH_ARGS:-} || status=1
if [ "${TRITON:-1}" = 1 ]; then
  PYTHONUNBUFFERED=1 timeout 65 python3 bench/sparse_mla/triton_baseline.py --json "$OUT/triton.json" || status=1
  TRITON_SOURCE="measured in this run"
else
  python3 - "$ROOT/bench/results/sparse_mla-h200.json" "$OUT/triton.json" <<'PY' || status=1
import json, sys
d = json.load(open(sys.argv[1]))
c = d["ceilings"]
json.dump({"copy_tbps": c["copy_tbps"], "gemm_bf16_tflops": c["gemm_bf16_tflops"], "results": d["triton"],
           "self_check": d.get("triton_self_check")}, open(sys.argv[2], "w"))
PY
  TRITON_SOURCE="not rerun: Triton times and ceilings copied from the committed sparse_mla-h200.json"
fi

# 5. sm_120 checks: registers / shared memory / spills, and the instruction mix (no HGMMA / wgmma).
[ -n "$sm120_pid" ] && wait "$sm120_pid"
set +x
{
  echo "== ptxas -v, sm_120 =="
  grep -E "Compiling entry|registers|spill|smem" "$OUT/ptxas_sm120.txt" | sed 's/ptxas info *: //'
  echo "== SASS, sm_120 =="
  if command -v cuobjdump >/dev/null; then
    for f in $MLA_TUS; do
      sass=$(cuobjdump --dump-sass "$BUILD/sm120_$f.o" 2>&1)
      printf '%-16s arch: %s  HMMA %d  QMMA %d  LDSM %d  LDGSTS %d  UBLKCP %d  HGMMA %d  WGMMA/UTC* %d\n' "$f" \
        "$(echo "$sass" | grep -o 'arch = sm_[0-9a-z]*' | sort -u | tr '\n' ' ')" \
        "$(echo "$sass" | grep -c ' HMMA')" "$(echo "$sass" | grep -c ' QMMA')" "$(echo "$sass" | grep -c ' LDSM')" \
        "$(echo "$sass" | grep -c ' LDGSTS')" "$(echo "$sass" | grep -c 'UBLKCP')" "$(echo "$sass" | grep -c 'HGMMA')" "$(echo "$sass" | grep -cE 'WGMMA|UTCMMA|UTCHMMA')"
      if grep -qE 'HGMMA|WGMMA|UTCHMMA' <<<"$sass"; then echo "FAIL: Hopper/Blackwell-DC-only MMA in $f"; status=1; fi
    done
  else
    echo "cuobjdump not found"
  fi
} | tee "$OUT/sass_sm120.txt"

# 6. Summary (last, so it is at the end of the output).
python3 bench/sparse_mla/report.py --ours "$OUT/ours.json" --triton "$OUT/triton.json" \
  --out "$OUT/sparse_mla-h200.json" --commit "$COMMIT" --command "ARCHS=$ARCHS TRITON=${TRITON:-1} scripts/gpu_mla.sh" \
  --triton-source "$TRITON_SOURCE" || status=1
echo "gpu tests exit code: $test_rc; overall status: $status"
exit $status

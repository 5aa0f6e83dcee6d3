# Sourced (not run) by the device scripts that use binaries built on the development machine
# (scripts/pack_prebuilt.sh), from the repository root: sets OUT (created), P (the bundle, extracted when only
# its .tar.xz came), COMMIT, B (its bin/), LD_LIBRARY_PATH (its lib/: mimalloc, PCRE2, ICU), links the source
# path compiled into the tests (the fixtures) to this copy, and defines stamp (seconds since the start), find_ncu,
# sparse_mla_tests, gpu_tests_all (the whole GPU test binary) and mla_record (issue 6's benchmark of record from the
# bundle's binaries).
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
P=${P:-.carry/final/prebuilt}
COMMIT=${COMMIT:-unknown}
[ -d "$P" ] || tar -xJf "$P.tar.xz" -C "$(dirname "$P")"
export LD_LIBRARY_PATH=$PWD/$P/lib
src=$(cat "$P/SOURCE_DIR")
if [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -sfn "$PWD" "$src"; fi
B=$PWD/$P/bin
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }

# Nsight Compute's command line tool: on the PATH, else the newest install under /opt/nvidia, else the toolkit's.
find_ncu() {
  command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || echo /usr/local/cuda/bin/ncu
}

# The bundle's sparse MLA GPU test cases (timeout $1 seconds, default 240) into $OUT/mla-tests.txt: prints the exit
# status, doctest's summary and any failure lines.
sparse_mla_tests() {
  timeout "${1:-240}" "$B/glm5rt_gpu_tests" -tc="*sparse MLA*" > "$OUT/mla-tests.txt" 2>&1
  echo "rc $?"; tail -4 "$OUT/mla-tests.txt"
  grep -E "ERROR|FAIL" "$OUT/mla-tests.txt" | head -20
}

# The sparse MLA and multi-pool GPU test cases as shipped (timeout $1 seconds): prints the exit status, doctest's
# summary and any failure lines, keeps the failures and the summary in $OUT/tests-summary.txt (the full log is ~10
# MB), and returns the binary's exit status (the session scripts time nothing after a failure).
mla_tests_shipped() {
  stamp "tests as shipped"
  timeout "$1" "$B/glm5rt_gpu_tests" -tc="*sparse MLA*,*multi*pool*" > "$OUT/tests.txt" 2>&1
  local rc=$?
  echo "rc $rc"; tail -n 3 "$OUT/tests.txt"; grep -E "ERROR|FAIL" "$OUT/tests.txt" | head -10
  grep -E "ERROR|FAIL|^\[doctest\]" "$OUT/tests.txt" | head -200 > "$OUT/tests-summary.txt"; rm -f "$OUT/tests.txt"
  return "$rc"
}

# The whole GPU test binary of the bundle: prints its exit status and doctest's summary lines, keeps only those
# ($OUT/gpu-tests-summary.txt).
gpu_tests_all() {
  timeout 400 "$B/glm5rt_gpu_tests" > "$OUT/gpu-tests.txt" 2>&1
  echo "rc $?"; grep -E "^\[doctest\] (test cases|assertions|Status)" "$OUT/gpu-tests.txt"
  grep -E "^\[doctest\]" "$OUT/gpu-tests.txt" > "$OUT/gpu-tests-summary.txt"; rm -f "$OUT/gpu-tests.txt"
}

# Issue 6's benchmark of record (scripts/gpu_mla.sh on the bundle's binaries: the sparse MLA tests, the benchmark,
# the Triton baseline and the machine's ceilings in the same run, the sm_120 ptxas / SASS report) into $OUT/mla,
# returned packed as $OUT/mla.tgz; prints gpu_mla.sh's exit status, the tests' summary, the table's rows and any
# sm_120 line with spills or a forbidden MMA.
mla_record() {
  echo "$COMMIT" > GIT_COMMIT
  PREBUILT=$B BENCH_ARGS=--no-sweep TEST_TIMEOUT=150 BENCH_TIMEOUT=300 OUT=$OUT/mla bash scripts/gpu_mla.sh \
    > "$OUT/mla-run.txt" 2>&1
  echo "gpu_mla.sh rc $?"
  grep -E "test cases|Status" "$OUT/mla/tests.txt" | tail -2
  tail -40 "$OUT/mla/log" | grep -E "^\| |TFLOP|T=" | head -40
  grep -E "FAIL|spill stores" "$OUT/mla/sass_sm120.txt" | grep -v " 0 bytes spill stores"
  tar -czf "$OUT/mla.tgz" -C "$OUT" mla && rm -rf "${OUT:?}/mla"
}

#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (-fsanitize=fuzzer,address,undefined) and runs each for a
# bounded time over its seed corpus (fuzz/corpus/<target>/, never modified: new inputs go to the output
# directory). Exits non-zero when a target crashes; the crashing input is left in OUT/artifacts/.
#
# Usage: scripts/fuzz.sh [--seconds N (default 20)] [--out DIR (default build-fuzz)] [--jobs N] [target...]
# Needs: clang++ and libclang-rt-14-dev (scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=20
out=build-fuzz
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(safetensors_header model_config checkpoint)
cxx=${CLANGXX:-clang++}
command -v "$cxx" >/dev/null || { echo "fuzz: $cxx not found (apt-get install clang libclang-rt-14-dev)"; exit 1; }
mkdir -p "$out"

# Each target links only the parsers it drives (no mimalloc, zstd, ... needed).
declare -A sources=(
  [safetensors_header]="lib/model/safetensors.cpp lib/model/weights.cpp lib/runtime/log.cpp"
  [model_config]="lib/model/config.cpp lib/runtime/log.cpp"
  [checkpoint]="lib/model/checkpoint.cpp lib/model/config.cpp lib/model/safetensors.cpp lib/model/weights.cpp lib/runtime/log.cpp"
)
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -fno-omit-frame-pointer -Iinclude -Ilib -I.)

status=0
for t in "${targets[@]}"; do
  [ -n "${sources[$t]:-}" ] || { echo "fuzz: unknown target '$t'"; exit 2; }
  bin="$out/${t}_fuzzer"
  # Rebuild only when a source changed (ctest runs this script on every test run).
  deps=(fuzz/${t}_fuzzer.cpp ${sources[$t]} lib/model/*.hpp lib/runtime/*.hpp include/glm5rt/glm5rt.h)
  if [ ! -x "$bin" ] || [ -n "$(find "${deps[@]}" -newer "$bin" 2>/dev/null | head -1)" ]; then
    echo "fuzz: building $bin"
    "$cxx" "${flags[@]}" "fuzz/${t}_fuzzer.cpp" ${sources[$t]} -o "$bin" -lpthread
  fi
  mkdir -p "$out/corpus/$t" "$out/artifacts/$t"
  echo "fuzz: running $t for ${seconds}s"
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -dict="fuzz/$t.dict" -artifact_prefix="$out/artifacts/$t/" \
        "$out/corpus/$t" "fuzz/corpus/$t" > "$out/$t.log" 2>&1; then
    echo "fuzz: $t FAILED; last lines of $out/$t.log:"
    tail -40 "$out/$t.log"
    status=1
  else
    grep -E "stat::number_of_executed_runs|stat::new_units_added|cov:" "$out/$t.log" | tail -3 | sed "s/^/fuzz: $t: /"
  fi
done
exit $status

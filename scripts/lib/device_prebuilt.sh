# Sourced (not run) by the device scripts that use binaries built on the development machine
# (scripts/pack_prebuilt.sh), from the repository root: sets OUT (created), P (the bundle, extracted when only
# its .tar.xz came), COMMIT, B (its bin/), LD_LIBRARY_PATH (its lib/: mimalloc, PCRE2, ICU), links the source
# path compiled into the tests (the fixtures) to this copy, and defines stamp (seconds since the start).
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

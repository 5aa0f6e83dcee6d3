#!/usr/bin/env bash
# Session 23: on the development machine, a build of the sparse MLA benchmark (sm_90) in which one kernel unit (UNIT,
# default sparse_mla_wsp_bf16: variant 14's bf16 kernels) is compiled from another source tree and / or with more
# nvcc options, every other unit from this checkout; for scripts/gpu_mla_variants.sh, which times such builds
# against each other. The other units' objects are built once into <dir>/base-<unit> (remove it after changing them).
#   bash scripts/build_mla_bench_variant.sh <dir> <name> [source tree, default this checkout] [nvcc options]
#   e.g.  ... .carry/s23/var old ;  ... .carry/s23/var rul8 "$PWD" "-Xptxas --register-usage-level=8"
# Result: <dir>/<name>/bin/glm5rt_bench_sparse_mla (and <dir>/<name>/wsp.o for scripts/sass_loop.py).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: build_mla_bench_variant.sh <dir> <name> [source tree] [nvcc options]}
name=${2:?name}
src=${3:-$PWD}
extra=${4:-}
unit=${UNIT:-sparse_mla_wsp_bf16}
mkdir -p "$dir" && dir=$(cd "$dir" && pwd)
source scripts/lib/mla_units.sh  # mla_bundle_flags: the device bundles' flags; mla_unit_flags
read -ra FLAGS <<< "$(mla_bundle_flags 90)"
base=$dir/base-$unit/obj
if [ ! -f "$base/.done" ]; then
  mkdir -p "$base"
  srcs=()
  for f in kernels/attention/*.cu kernels/indexer/*.cu bench/sparse_mla/sparse_mla_bench.cu; do
    [ "$f" = "kernels/attention/$unit.cu" ] || srcs+=("$f")
  done
  export -f mla_unit_flags
  # shellcheck disable=SC2016  # $(...) expands in the inner shell, per file
  printf '%s\n' "${srcs[@]}" |
    xargs -P "${JOBS:-2}" -I{} bash -c 'nvcc '"${FLAGS[*]}"' $(mla_unit_flags {}) -x cu -c {} -o "'"$base"'/$(echo {} | tr / _).o"'
  touch "$base/.done"
fi
mkdir -p "$dir/$name/bin"
# shellcheck disable=SC2086  # extra: words
# shellcheck disable=SC2046  # the unit's options: words (this checkout's; `extra` comes after them and overrides)
(cd "$src" && nvcc "${FLAGS[@]}" $(mla_unit_flags "$unit") $extra -c "kernels/attention/$unit.cu" -o "$dir/$name/wsp.o")
nvcc "${FLAGS[@]}" -o "$dir/$name/bin/glm5rt_bench_sparse_mla" "$base"/kernels_*.o "$base"/bench_*.o "$dir/$name/wsp.o"
echo "$dir/$name/bin/glm5rt_bench_sparse_mla"

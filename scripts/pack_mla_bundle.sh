#!/usr/bin/env bash
# The sparse MLA bundle a device call carries (session 20; until then laid out by hand each session): the sm_90
# binaries of scripts/prebuild_mla_sm90.sh in <bundle>/bin, the source path compiled into the tests in
# <bundle>/SOURCE_DIR, and, with SM120=1, the sm_120 objects of every attention unit with their ptxas report
# (sm120_*.o, ptxas_sm120.txt: scripts/gpu_mla.sh then reports them instead of compiling them on the device),
# packed as <bundle>.tar.xz (scripts/lib/device_prebuilt.sh unpacks it there).
#   SM120=1 JOBS=2 bash scripts/pack_mla_bundle.sh .carry/s20/rec/prebuilt     (NVCC_EXTRA: as prebuild_mla_sm90.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: pack_mla_bundle.sh <bundle dir>}
JOBS=${JOBS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
JOBS=$JOBS bash scripts/prebuild_mla_sm90.sh "$tmp/pb" >"$tmp/prebuild.log" 2>&1 || { tail -30 "$tmp/prebuild.log"; exit 1; }
rm -rf "$out" && mkdir -p "$out/lib"
cp -r "$tmp/pb/bin" "$out/"
pwd >"$out/SOURCE_DIR"
if [ "${SM120:-0}" = 1 ]; then
  source scripts/lib/mla_units.sh  # the units scripts/gpu_mla.sh reports, with its flags and theirs
  export -f mla_unit_flags
  # shellcheck disable=SC2086,SC2016  # the unit names: words; $PWD expands in the inner shell
  printf '%s\n' $MLA_TUS | xargs -P "$JOBS" -I{} bash -c 'nvcc '"$MLA_SM120_FLAGS"' $(mla_unit_flags {}) -I"$PWD" -c kernels/attention/{}.cu \
    -o "'"$out"'/bin/sm120_{}.o" > "'"$tmp"'/ptxas_{}.txt" 2>&1' || { cat "$tmp"/ptxas_*.txt; exit 1; }
  cat "$tmp"/ptxas_*.txt >"$out/bin/ptxas_sm120.txt"
fi
(cd "$(dirname "$out")" && XZ_OPT=-9 tar -cJf "$(basename "$out").tar.xz" "$(basename "$out")")
rm -rf "$out"
du -sh "$out.tar.xz"

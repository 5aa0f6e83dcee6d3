# shellcheck shell=bash
# Sourced (not run) by scripts/gpu_mla.sh and scripts/pack_mla_bundle.sh: the sparse MLA translation units whose
# sm_120 objects and ptxas report issue 6's record carries, and the nvcc flags each is compiled with for sm_120
# (the caller adds -I<repository root> -c <unit> -o <object>); by scripts/prebuild_mla_sm90.sh and
# scripts/build_mla_bench_variant.sh: the flags of the device bundles' units (mla_bundle_flags); by all of them: a
# unit's own options (mla_unit_flags: kernels/attention/unit_nvcc_options.txt, as CMake reads them).
# shellcheck disable=SC2034  # used by the scripts that source this
MLA_TUS="sparse_mla_bf16 sparse_mla_fp8 sparse_mla_pipe_bf16 sparse_mla_pipe_fp8 sparse_mla_ws_bf16 sparse_mla_ws_fp8
         sparse_mla_wsr_bf16 sparse_mla_wsg_bf16 sparse_mla_wsp_bf16 sparse_mla_wsp_fp8 sparse_mla_reg_fp8 sparse_mla_wsf_fp8
         sparse_mla_wsf16_fp8 sparse_mla"
# shellcheck disable=SC2034  # used by the scripts that source this
MLA_SM120_FLAGS="-std=c++17 -O3 --expt-relaxed-constexpr -gencode arch=compute_120,code=sm_120 -Xptxas -v"
# The nvcc flags every unit of a device bundle is compiled with (scripts/prebuild_mla_sm90.sh) and those of a
# benchmark variant (scripts/build_mla_bench_variant.sh), which must match so that the variants compare with the
# bundles: for sm_$1 (default 90), from the repository root.
mla_bundle_flags() {
  echo "-std=c++17 -O3 -I. --expt-relaxed-constexpr -lineinfo -Xptxas=-warn-spills -gencode arch=compute_${1:-90},code=sm_${1:-90}"
}
# The options of one unit beyond the others' (name or path of the .cu; nothing for most), from
# kernels/attention/unit_nvcc_options.txt of this checkout, as kernels/CMakeLists.txt sets them. (Exported with the
# file's path, so that `export -f mla_unit_flags` works in the shells xargs starts.)
MLA_UNIT_OPTIONS=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/kernels/attention/unit_nvcc_options.txt
export MLA_UNIT_OPTIONS
mla_unit_flags() {
  awk -v u="$(basename "$1" .cu)" '$1 == u { $1 = ""; sub(/^ +/, ""); print }' "$MLA_UNIT_OPTIONS"
}

#!/usr/bin/env bash
# Builds, on the development machine, the MoE / FP8 GEMM GPU tests (test_fp8_gemm.cu, test_fp8_grouped_proj.cu,
# test_moe.cu, test_moe_caller_routing.cpp) and the MoE benchmark for sm_90 with nvcc directly (no CMake, no other
# kernel families), -lineinfo so that compute-sanitizer reports source lines, so that a device call spends no time
# building: scripts/gpu_moe_lines.sh runs them from $P/bin.
#   scripts/prebuild_moe_sm90.sh [OUTDIR]     (default prebuilt-moe; JOBS=1)
set -euo pipefail
cd "$(dirname "$0")/.."
P=${1:-prebuilt-moe}
ARCH=${ARCH:-90}
JOBS=${JOBS:-1}
mkdir -p "$P/obj" "$P/bin"
FLAGS=(-std=c++17 -O3 -I. --expt-relaxed-constexpr -lineinfo -Xptxas=-warn-spills -gencode "arch=compute_$ARCH,code=sm_$ARCH")
srcs=(kernels/gemm/*.cu kernels/moe/*.cu kernels/common/simple_elementwise.cu tests/gpu/test_fp8_gemm.cu
      tests/gpu/test_fp8_grouped_proj.cu tests/gpu/test_moe.cu tests/gpu/test_moe_caller_routing.cpp
      tests/support/doctest_main_gpu.cpp bench/moe/bench_moe.cu)
# Rebuild only what changed (an object older than its source or than any header of kernels/gemm, kernels/moe).
newest_hdr=$(ls -t kernels/gemm/*.cuh kernels/gemm/*.h kernels/moe/*.h kernels/moe/*.cuh tests/gpu/*.hpp 2>/dev/null | head -1)
todo=()
for s in "${srcs[@]}"; do
  o="$P/obj/$(echo "$s" | tr / _).o"
  if [ ! -f "$o" ] || [ "$s" -nt "$o" ] || [ "$newest_hdr" -nt "$o" ]; then todo+=("$s"); fi
done
if [ ${#todo[@]} -gt 0 ]; then
  printf '%s\n' "${todo[@]}" | xargs -P "$JOBS" -I{} sh -c 'o="'"$P"'/obj/$(echo {} | tr / _).o"; nvcc '"${FLAGS[*]}"' -x cu -c {} -o "$o"'
fi
K=$(ls "$P"/obj/kernels_*.o)
T=$(ls "$P"/obj/tests_*.o)
nvcc "${FLAGS[@]}" -o "$P/bin/glm5rt_gpu_tests" $K $T
nvcc "${FLAGS[@]}" -o "$P/bin/glm5rt_bench_moe" $(ls "$P"/obj/kernels_gemm_*.o "$P"/obj/kernels_moe_*.o) "$P/obj/bench_moe_bench_moe.cu.o" -lcublasLt
ls -la "$P/bin"

#!/usr/bin/env bash
# Builds, on the development machine, the sparse MLA GPU tests (test_sparse_mla.cu + test_multi_pool.cu)
# and the sparse MLA benchmarks (sparse_mla_bench, mla_timeline) for sm_90 with nvcc directly (no CMake, no other kernel families), so that a
# device call spends no time building: scripts/gpu_mla_plan.sh runs them from $P/bin.
#   scripts/prebuild_mla_sm90.sh [OUTDIR]     (default prebuilt-mla; JOBS=2)
set -euo pipefail
cd "$(dirname "$0")/.."
P=${1:-prebuilt-mla}
ARCH=${ARCH:-90}
JOBS=${JOBS:-2}
mkdir -p "$P/obj" "$P/bin"
FLAGS=(-std=c++17 -O3 -I. --expt-relaxed-constexpr -lineinfo -Xptxas=-warn-spills -gencode "arch=compute_$ARCH,code=sm_$ARCH")
srcs=(kernels/attention/*.cu kernels/indexer/*.cu tests/gpu/test_sparse_mla.cu tests/gpu/test_multi_pool.cu tests/support/doctest_main_gpu.cpp
      bench/sparse_mla/sparse_mla_bench.cu bench/sparse_mla/mla_timeline.cu)
printf '%s\n' "${srcs[@]}" | xargs -P "$JOBS" -I{} sh -c 'o="'"$P"'/obj/$(echo {} | tr / _).o"; nvcc '"${FLAGS[*]}"' -x cu -c {} -o "$o" || nvcc '"${FLAGS[*]}"' -c {} -o "$o"'
K=$(ls "$P"/obj/kernels_attention_*.o "$P"/obj/kernels_indexer_*.o)
nvcc "${FLAGS[@]}" -o "$P/bin/glm5rt_gpu_tests" $K "$P/obj/tests_gpu_test_sparse_mla.cu.o" "$P/obj/tests_gpu_test_multi_pool.cu.o" \
  "$P/obj/tests_support_doctest_main_gpu.cpp.o"
nvcc "${FLAGS[@]}" -o "$P/bin/glm5rt_bench_sparse_mla" $K "$P/obj/bench_sparse_mla_sparse_mla_bench.cu.o"
nvcc "${FLAGS[@]}" -o "$P/bin/glm5rt_bench_mla_timeline" $K "$P/obj/bench_sparse_mla_mla_timeline.cu.o"
ls -la "$P/bin"

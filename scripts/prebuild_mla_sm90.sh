#!/usr/bin/env bash
# Builds, on the development machine, the sparse MLA GPU tests (test_sparse_mla.cu + test_multi_pool.cu)
# and the sparse MLA benchmarks (sparse_mla_bench, mla_timeline, mla_item_timeline, gather_paths) for sm_90 with nvcc directly (no CMake, no other kernel families), so that a
# device call spends no time building: scripts/gpu_mla_plan.sh runs them from $P/bin.
#   scripts/prebuild_mla_sm90.sh [OUTDIR]     (default prebuilt-mla; JOBS=2; NVCC_EXTRA: more nvcc options)
set -euo pipefail
cd "$(dirname "$0")/.."
P=${1:-prebuilt-mla}
ARCH=${ARCH:-90}
JOBS=${JOBS:-2}
mkdir -p "$P/obj" "$P/bin"
source scripts/lib/mla_units.sh  # mla_bundle_flags, mla_unit_flags
read -ra FLAGS <<< "$(mla_bundle_flags "$ARCH")"
# NVCC_EXTRA: more nvcc options for every unit (experiments' macros, e.g. -DGLM5RT_MLA_DIAG_V=1).
# shellcheck disable=SC2206  # the options: words
FLAGS+=(${NVCC_EXTRA:-})
srcs=(kernels/attention/*.cu kernels/indexer/*.cu tests/gpu/test_sparse_mla.cu tests/gpu/test_multi_pool.cu tests/support/doctest_main_gpu.cpp
      bench/sparse_mla/sparse_mla_bench.cu bench/sparse_mla/mla_timeline.cu)
export -f mla_unit_flags
# shellcheck disable=SC2016  # $(...) and $u expand in the inner shell, per file
printf '%s\n' "${srcs[@]}" | xargs -P "$JOBS" -I{} bash -c 'o="'"$P"'/obj/$(echo {} | tr / _).o"; u=$(mla_unit_flags {}); nvcc '"${FLAGS[*]}"' $u -x cu -c {} -o "$o" || nvcc '"${FLAGS[*]}"' $u -c {} -o "$o"'
K=$(ls "$P"/obj/kernels_attention_*.o "$P"/obj/kernels_indexer_*.o)
nvcc "${FLAGS[@]}" -o "$P/bin/glm5rt_gpu_tests" $K "$P/obj/tests_gpu_test_sparse_mla.cu.o" "$P/obj/tests_gpu_test_multi_pool.cu.o" \
  "$P/obj/tests_support_doctest_main_gpu.cpp.o"
nvcc "${FLAGS[@]}" -o "$P/bin/glm5rt_bench_sparse_mla" $K "$P/obj/bench_sparse_mla_sparse_mla_bench.cu.o"
nvcc "${FLAGS[@]}" -o "$P/bin/glm5rt_bench_mla_timeline" $K "$P/obj/bench_sparse_mla_mla_timeline.cu.o"
# Session 19: the persistent-item probe, with its own build of variant 14's units (the stamps compiled in).
pids=()
for u in bf16 fp8; do
  # shellcheck disable=SC2046  # the unit's options: words
  nvcc "${FLAGS[@]}" $(mla_unit_flags sparse_mla_wsp_$u) -DGLM5RT_MLA_ITEM_PROBE -c kernels/attention/sparse_mla_wsp_$u.cu \
    -o "$P/obj/probe_wsp_$u.o" &
  pids+=($!)
done
nvcc "${FLAGS[@]}" -c bench/sparse_mla/mla_item_timeline.cu -o "$P/obj/bench_mla_item_timeline.o"
for pid in "${pids[@]}"; do wait "$pid"; done
# shellcheck disable=SC2046  # the object list: words
nvcc "${FLAGS[@]}" -o "$P/bin/glm5rt_bench_mla_item_timeline" $(echo "$K" | grep -v _sparse_mla_wsp_) "$P"/obj/probe_wsp_*.o \
  "$P/obj/bench_mla_item_timeline.o"
# Session 27: the copy paths on the gather alone (CUDA runtime only).
nvcc "${FLAGS[@]}" -o "$P/bin/glm5rt_bench_gather_paths" bench/sparse_mla/gather_paths.cu
ls -la "$P/bin"

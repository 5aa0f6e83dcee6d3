#!/usr/bin/env bash
# Builds only the indexer's GPU tests and benchmark with nvcc directly (no CMake, no other kernel family):
# a few translation units, so that a device call spends its seconds measuring, not compiling.
# Usage: scripts/build_indexer_direct.sh OUTDIR [ARCH=90] [JOBS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?output folder}
arch=${2:-90}
jobs=${3:-2}
mkdir -p "$out/obj"
export PATH=/usr/local/cuda/bin:$PATH
flags=(-std=c++17 -O3 -I. -arch=sm_$arch --expt-relaxed-constexpr -lineinfo -Xptxas=-warn-spills)
srcs=(kernels/indexer/indexer_scores.cu kernels/indexer/indexer_topk.cu kernels/indexer/indexer_topk_reg.cu kernels/indexer/indexer_topk_cluster.cu kernels/indexer/indexer_launch.cu
      tests/gpu/test_indexer.cu tests/support/doctest_main_gpu.cpp bench/indexer/bench_indexer.cu)
printf '%s\n' "${srcs[@]}" | xargs -P "$jobs" -I{} sh -c \
  'f={}; o='"$out"'/obj/$(echo "$f" | tr / _).o; case "$f" in *.cpp) x="-x cu";; *) x="";; esac; nvcc '"${flags[*]}"' $x -c "$f" -o "$o"'
k=("$out"/obj/kernels_indexer_*.o)
nvcc -arch=sm_$arch -o "$out/test_indexer" "${k[@]}" "$out/obj/tests_gpu_test_indexer.cu.o" "$out/obj/tests_support_doctest_main_gpu.cpp.o"
nvcc -arch=sm_$arch -o "$out/bench_indexer" "${k[@]}" "$out/obj/bench_indexer_bench_indexer.cu.o"
echo "built $out/test_indexer $out/bench_indexer (sm_$arch)"

#!/usr/bin/env bash
# Bundle sm_90 binaries built on the development machine (a build tree of the `default` preset configured
# with -DCMAKE_CUDA_ARCHITECTURES=90) with the runtime libraries the accelerator machine lacks (mimalloc,
# PCRE2, ICU), so that scripts/gpu_check.sh runs them there instead of spending device time on a build.
#
#   bash scripts/pack_prebuilt.sh <build dir> <bundle dir>     -> <bundle dir>.tar.xz
#
# The bundle holds bin/ (whichever of the GPU test suite and the benchmarks were built), lib/ and
# SOURCE_DIR (the source tree compiled into the tests as the fixtures' path; gpu_check.sh links it to the
# copy on the device).
set -euo pipefail
build=$1 out=$2
src=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib"
for b in tests/glm5rt_gpu_tests bench/forward/glm5rt-bench bench/moe/glm5rt_bench_moe bench/sampling/bench_sampling \
         bench/sparse_mla/glm5rt_bench_sparse_mla bench/indexer/bench_indexer bench/gemm/glm5rt_bench_proj; do
  [ -x "$build/$b" ] && cp "$build/$b" "$out/bin/"
done
[ -x "$out/bin/glm5rt_gpu_tests" ] || { echo "no $build/tests/glm5rt_gpu_tests" >&2; exit 1; }
for b in "$out"/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}' | grep -E 'mimalloc|pcre2|icu' || true
done | sort -u | while read -r l; do cp -L "$l" "$out/lib/"; done
echo "$src" > "$out/SOURCE_DIR"
(cd "$(dirname "$out")" && XZ_OPT=-9 tar -cJf "$(basename "$out").tar.xz" "$(basename "$out")")
du -sh "$out.tar.xz"

// Sum of fp8_gemm's split-K partials into float32, scattered per part (Fp8SplitReduceParams): the one
// launch after a grouped projection GEMM (several projections as parts of one output, each K-sliced
// into `slices` groups of rows). One thread per 8 consecutive columns of one row: a part boundary is a
// multiple of 8, so the 8 columns belong to one part and go out as two float4 stores.
#include "kernels/gemm/fp8_gemm.h"
#include "kernels/gemm/launch.cuh"

namespace glm5rt::kernels {
namespace {

__global__ void split_reduce_kernel(const Fp8SplitReduceParams p) {
  detail::pdl_wait_and_release();
  const int groups8 = p.n / 8;
  const long long item = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (item >= static_cast<long long>(p.rows) * groups8) return;
  const int row = static_cast<int>(item / groups8), col = static_cast<int>(item % groups8) * 8;
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int s = 0; s < p.slices; ++s) {  // slice order, as launch_sum_slices_bf16_to_f32
    const uint4 v = *reinterpret_cast<const uint4*>(p.in + (static_cast<size_t>(s) * p.rows + row) * p.ld_in + col);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      acc[2 * j] += __low2float(h[j]);
      acc[2 * j + 1] += __high2float(h[j]);
    }
  }
  int part = 0, first = 0, end = p.part_begin[1];
#pragma unroll
  for (int i = 1; i < kFp8MaxVariedParts; ++i)
    if (i < p.num_parts && col >= p.part_begin[i]) {
      part = i;
      first = p.part_begin[i];
      end = p.part_begin[i + 1];
    }
  float* out = nullptr;
#pragma unroll
  for (int i = 0; i < kFp8MaxVariedParts; ++i)
    if (i == part) out = p.out[i];
  float4* dst = reinterpret_cast<float4*>(out + static_cast<size_t>(row) * (end - first) + (col - first));
  dst[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  dst[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
}

}  // namespace

cudaError_t fp8_split_reduce(const Fp8SplitReduceParams& p, cudaStream_t stream) {
  if (p.rows < 0 || p.slices < 1 || p.n < 8 || p.n % 8 != 0 || p.ld_in < p.n || p.ld_in % 8 != 0 ||
      p.num_parts < 1 || p.num_parts > kFp8MaxVariedParts || p.part_begin[0] != 0 || p.part_begin[p.num_parts] != p.n)
    return cudaErrorInvalidValue;
  for (int i = 1; i <= p.num_parts; ++i)
    if (p.part_begin[i] <= p.part_begin[i - 1] || p.part_begin[i] % 8 != 0) return cudaErrorInvalidValue;
  if (p.rows == 0) return cudaSuccess;
  if (!p.in || (reinterpret_cast<uintptr_t>(p.in) & 15u) != 0) return cudaErrorInvalidValue;
  for (int i = 0; i < p.num_parts; ++i)
    if (!p.out[i] || (reinterpret_cast<uintptr_t>(p.out[i]) & 15u) != 0) return cudaErrorInvalidValue;
  const long long items = static_cast<long long>(p.rows) * (p.n / 8);
  const int threads = 128;
  const long long blocks = (items + threads - 1) / threads;
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  return detail::launch(split_reduce_kernel, dim3(static_cast<unsigned>(blocks)), dim3(threads), 0, stream, p.pdl, p);
}

}  // namespace glm5rt::kernels

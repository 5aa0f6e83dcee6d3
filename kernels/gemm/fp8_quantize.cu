// Per-token-group (128) FP8 e4m3 quantisation of bf16 activations: one warp per (row, group).
#include "kernels/gemm/fp8_common.cuh"
#include "kernels/gemm/fp8_gemm.h"
#include "kernels/gemm/launch.cuh"

namespace glm5rt::kernels {
namespace {

__global__ void quantize_groups_kernel(const __nv_bfloat16* __restrict__ x, int ldx, int rows, int k,
                                       uint8_t* __restrict__ q, int ldq, float* __restrict__ scale,
                                       int ld_scale) {
  detail::pdl_wait_and_release();
  const int groups = k / kFp8Block;
  const long long item = static_cast<long long>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (item >= static_cast<long long>(rows) * groups) return;
  const int row = static_cast<int>(item / groups), grp = static_cast<int>(item % groups);
  detail::quantize_group_warp(x + static_cast<size_t>(row) * ldx + grp * kFp8Block,
                              q + static_cast<size_t>(row) * ldq + grp * kFp8Block,
                              scale + static_cast<size_t>(row) * ld_scale + grp);
}

}  // namespace

cudaError_t fp8_quantize_groups(const __nv_bfloat16* x, int ldx, int rows, int k, uint8_t* q, int ldq,
                                float* scale, int ld_scale, cudaStream_t stream, bool pdl) {
  if (rows < 0 || k <= 0 || k % kFp8Block != 0 || ldx < k || ldq < k || ld_scale < k / kFp8Block ||
      ldx % 4 != 0 || ldq % 4 != 0)
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (!x || !q || !scale) return cudaErrorInvalidValue;
  const long long items = static_cast<long long>(rows) * (k / kFp8Block);
  const int warps_per_block = 8;
  const long long blocks = (items + warps_per_block - 1) / warps_per_block;
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  return detail::launch(quantize_groups_kernel, dim3(static_cast<unsigned>(blocks)), dim3(warps_per_block * 32), 0,
                        stream, pdl, x, ldx, rows, k, q, ldq, scale, ld_scale);
}

}  // namespace glm5rt::kernels

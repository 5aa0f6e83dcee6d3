// The two element-wise stages around the expert GEMMs: SwiGLU + FP8 re-quantisation of the intermediate
// (the down projection's input), and the weighted combine of the expert outputs back to token order.
#include "kernels/gemm/fp8_common.cuh"
#include "kernels/gemm/fp8_gemm.h"
#include "kernels/gemm/launch.cuh"
#include "kernels/moe/moe.h"
#include "kernels/moe/moe_internal.h"

namespace glm5rt::kernels {
namespace {

// One warp per (row, 128-group): lane owns 4 consecutive intermediate values.
// release_early: let the next kernel launch (PDL) before waiting for the previous one. Safe for any
// dependent that waits (griddepcontrol.wait) before reading this kernel's inputs' producers: this grid
// completes only after its own wait, so the dependent's wait still covers the gate_up GEMM. It lets the
// down GEMM's blocks take SM slots as the gate_up GEMM's blocks leave and start their weight prefetch
// during the gate_up tail, instead of only after the gate_up GEMM has completed.
__global__ void swiglu_quantize_kernel(const __nv_bfloat16* __restrict__ gate_up, int rows, int inter,
                                       uint8_t* __restrict__ q, float* __restrict__ scale, bool release_early,
                                       unsigned long long* stamps) {
  if (threadIdx.x == 0) detail::stamp(stamps, detail::kStampStart);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (release_early) {
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
  } else {
    detail::pdl_wait_and_release();
  }
#else
  detail::pdl_wait_and_release();
#endif
  if (threadIdx.x == 0) detail::stamp(stamps, detail::kStampWaited);
  const int groups = inter / kFp8Block;
  const long long item = static_cast<long long>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (item >= static_cast<long long>(rows) * groups) return;
  const int row = static_cast<int>(item / groups), grp = static_cast<int>(item % groups);
  const int lane = threadIdx.x % 32;
  const __nv_bfloat16* g_src = gate_up + static_cast<size_t>(row) * 2 * inter + grp * kFp8Block;
  float s = 0.f;
  const uint32_t packed = detail::swiglu_quantize_group_warp(g_src, g_src + inter, &s);
  *reinterpret_cast<uint32_t*>(q + static_cast<size_t>(row) * inter + grp * kFp8Block + lane * 4) = packed;
  if (lane == 0) scale[static_cast<size_t>(row) * groups + grp] = s;
  if (lane == 0) detail::stamp(stamps, detail::kStampEnd);
}

// One block per token; each thread sums 8 columns at a time over the token's k rows in order.
__global__ void combine_kernel(const __nv_bfloat16* __restrict__ y, int hidden, int top_k,
                               const int* __restrict__ slot_row, const float* __restrict__ topk_weights,
                               const int* __restrict__ shared_row_begin, int shared_row_fixed,
                               __nv_bfloat16* __restrict__ out, unsigned long long* stamps) {
  if (threadIdx.x == 0) detail::stamp(stamps, detail::kStampStart);
  detail::pdl_wait_and_release();
  if (threadIdx.x == 0) detail::stamp(stamps, detail::kStampWaited);
  const int t = blockIdx.y;
  const int shared_row0 = shared_row_begin ? *shared_row_begin : shared_row_fixed;
  const int col = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (col < hidden) {
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll 8
    for (int k = 0; k < top_k; ++k) {
      const int row = slot_row[static_cast<size_t>(t) * top_k + k];
      if (row < 0) continue;
      const float w = topk_weights[static_cast<size_t>(t) * top_k + k];
      const uint4 v = *reinterpret_cast<const uint4*>(y + static_cast<size_t>(row) * hidden + col);
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(h[j]);
        acc[2 * j] = fmaf(w, f.x, acc[2 * j]);
        acc[2 * j + 1] = fmaf(w, f.y, acc[2 * j + 1]);
      }
    }
    if (shared_row0 >= 0) {
      const uint4 v = *reinterpret_cast<const uint4*>(y + static_cast<size_t>(shared_row0 + t) * hidden + col);
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(h[j]);
        acc[2 * j] += f.x;
        acc[2 * j + 1] += f.y;
      }
    }
    uint4 o;
    __nv_bfloat162* oh = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
    for (int j = 0; j < 4; ++j) oh[j] = __floats2bfloat162_rn(acc[2 * j], acc[2 * j + 1]);
    *reinterpret_cast<uint4*>(out + static_cast<size_t>(t) * hidden + col) = o;
  }
  if (threadIdx.x == 0) detail::stamp(stamps, detail::kStampEnd);
}

}  // namespace

cudaError_t moe_swiglu_quantize(const __nv_bfloat16* gate_up, int rows, int inter, uint8_t* q, float* scale,
                                cudaStream_t stream, bool pdl) {
  return moe_swiglu_quantize_ex(gate_up, rows, inter, q, scale, stream, pdl, false, nullptr);
}

cudaError_t moe_swiglu_quantize_ex(const __nv_bfloat16* gate_up, int rows, int inter, uint8_t* q, float* scale,
                                   cudaStream_t stream, bool pdl, bool release_early,
                                   unsigned long long* stamps) {
  if (rows < 0 || inter <= 0 || inter % kFp8Block != 0) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (!gate_up || !q || !scale) return cudaErrorInvalidValue;
  const long long items = static_cast<long long>(rows) * (inter / kFp8Block);
  const long long blocks = (items + 7) / 8;
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  return detail::launch(swiglu_quantize_kernel, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, stream, pdl,
                        gate_up, rows, inter, q, scale, release_early, stamps);
}

cudaError_t moe_combine(const __nv_bfloat16* y, int tokens, int hidden, int top_k, const int* slot_row,
                        const float* topk_weights, const int* shared_row_begin, __nv_bfloat16* out,
                        cudaStream_t stream, bool pdl) {
  return moe_combine_at(y, tokens, hidden, top_k, slot_row, topk_weights, shared_row_begin, -1, out, stream, pdl,
                        nullptr);
}

cudaError_t moe_combine_at(const __nv_bfloat16* y, int tokens, int hidden, int top_k, const int* slot_row,
                           const float* topk_weights, const int* shared_row_begin, int shared_row0,
                           __nv_bfloat16* out, cudaStream_t stream, bool pdl, unsigned long long* stamps) {
  if (tokens < 0 || hidden <= 0 || hidden % 8 != 0 || top_k < 1) return cudaErrorInvalidValue;
  if (tokens == 0) return cudaSuccess;
  if (!y || !slot_row || !topk_weights || !out) return cudaErrorInvalidValue;
  if (tokens > 65535) return cudaErrorInvalidValue;
  // One thread per 8 columns of one token: at decode sizes the whole output is a handful of blocks
  // spread over SMs instead of one block per token looping.
  const dim3 grid((hidden / 8 + 127) / 128, tokens);
  return detail::launch(combine_kernel, grid, dim3(128), 0, stream, pdl, y, hidden, top_k, slot_row, topk_weights,
                        shared_row_begin, shared_row0, out, stamps);
}

}  // namespace glm5rt::kernels

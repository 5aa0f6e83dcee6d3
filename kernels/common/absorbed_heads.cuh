// The absorbed-attention per-head products at decode sizes (docs/GLM5.md "MLA, absorbed form"): for every
// row r and head h, c[r][h][j] = sum_k a[r][h][k] * W_h[j][k] with bf16 inputs, float32 accumulation and
// a bf16 result. Used by the CUDA backend for q_nope x W_UK (into the fast sparse MLA's packed query,
// whose rope tail it also fills: one launch instead of the row GEMM + pack_mla_query) and for
// o_lat x W_UV (into o_proj's bf16 input).
//
// Why not the row GEMM (simple_forward.cuh): it gives each thread one output feature and 16-row tiles,
// so each lane reads its own weight row (16-byte loads 384-1024 bytes apart across the warp) and issues
// 16 FMAs per weight whatever the row count. Here 8 lanes (k <= 192) or 16 lanes (k = 256, 384, 512)
// share one output feature and read its weight row coalesced, each lane keeping its 16-byte slices in
// registers (at most 4 per lane). They are loaded once, before the programmatic-dependent-launch wait
// (the weights are static, so their streaming overlaps the previous kernel's tail); then every row is a
// short dot product and a 3- or 4-step shuffle reduction. Meant for <= ~32 rows (a decode batch);
// prefill keeps the row GEMM.
//
// Rules as simple_forward.cuh: plain parameters, cudaError_t, no host synchronisation, graph-capturable.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace glm5k {

struct AbsorbedHeadsParams {
  const __nv_bfloat16* a = nullptr;  // row r, head h: K values at a + r * lda + h * a_head_stride
  // Or float32 input (a null): each value rounded to bf16 first (__float2bfloat16, what mla_prep's q_nope
  // conversion does), same strides in floats. The backend passes q_b's float32 output directly.
  const float* a_f32 = nullptr;
  int64_t lda = 0, a_head_stride = 0;
  const __nv_bfloat16* w = nullptr;  // head h: [n][k] row-major at w + h * n * k
  int32_t rows = 0, heads = 0, n = 0, k = 0;
  __nv_bfloat16* c = nullptr;  // row r, head h, feature j at c + r * ldc + h * c_head_stride + j
  int64_t ldc = 0, c_head_stride = 0;
  // Optional: tail_n float32 values per (row, head) at tail + r * tail_ld + h * tail_head_stride, converted
  // to bf16 right after the n products (c + r * ldc + h * c_head_stride + n + i): the fast MLA query's
  // rope part. With tail_cos / tail_sin ([rows, tail_n / 2], the backend's RoPE tables) the interleaved
  // pairs (2i, 2i + 1) are rotated first, exactly as mla_prep rotates q_rot (x0 c - x1 s, x1 c + x0 s).
  const float* tail = nullptr;
  int64_t tail_ld = 0, tail_head_stride = 0;
  const float* tail_cos = nullptr;
  const float* tail_sin = nullptr;
  int32_t tail_n = 0;
  bool pdl = false;  // launched as a programmatic dependent (sm_90+): weights load before the wait
};

// k in {64, 128, 192, 256, 384, 512}; a (or a_f32) and w 16-byte aligned, lda and a_head_stride multiples
// of 8 (bf16) or 4 (float32) elements; tail_n even when rotated.
bool absorbed_heads_supported(int32_t k);
cudaError_t launch_absorbed_heads(const AbsorbedHeadsParams& p, cudaStream_t stream);

}  // namespace glm5k

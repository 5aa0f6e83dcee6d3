// Decode-shaped FP8 GEMM (few rows per group): memory-bound, so the kernel's only job is to stream each
// group's weights once at full bandwidth. The weight rows are the mma's M dimension ("swap AB"): a warp
// owns 16 weight rows, each lane loads 2 x 32 contiguous bytes of them per 128-wide K block with 16-byte
// loads straight into mma operand registers (no shared memory, no dequantisation: the block scales are
// applied to the f32 partial sums once per 128-wide K block). Tokens (rows of A) are the mma's N = 8.
//
// Within one m16n8k32 the order of K does not matter as long as A and B agree. Lane (g = lane/4,
// c = lane%4) holds bytes [32c, 32c+32) of its weight rows g and g+8 for the current K block; mma j (0..3)
// takes words 2j and 2j+1 as the "k 4c..4c+3" and "k 16+4c..16+4c+3" registers, and the lane loads the
// same bytes of its token for B, so both sides use one permutation of K.
#pragma once

#include "kernels/gemm/fp8_common.cuh"
#include "kernels/gemm/fp8_gemm.h"

namespace glm5rt::kernels::detail {

constexpr int kDecodeWarps = 8;  // 8 warps x 16 rows = 128 weight rows per block = one scale row-block
constexpr int kDecodeThreads = kDecodeWarps * 32;

__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// NT: token tiles of 8 per pass (rows of A held at once); DEPTH: K blocks of weights in flight per lane.
template <int NT, int DEPTH>
__global__ void __launch_bounds__(kDecodeThreads) fp8_gemm_decode_kernel(const Fp8GemmParams p) {
#if GLM5RT_HAS_FP8_MMA
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int g = 0, row_begin = 0, rows = p.max_rows;
  if (p.group_offsets) {
    if (static_cast<int>(blockIdx.y) >= *p.num_active) return;
    g = p.active_groups[blockIdx.y];
    row_begin = p.group_offsets[g];
    rows = p.group_offsets[g + 1] - row_begin;
  }
  if (rows <= 0) return;
  const int n_block = blockIdx.x * kFp8Block;
  const int part = n_block / p.part_rows;
  const int n_in_part = n_block - part * p.part_rows;
  const int part_valid_rows = min(p.part_rows, p.n - part * p.part_rows);
  const int warp_row = n_in_part + warp * 16;  // first weight row (within the part) of this warp
  if (warp_row >= part_valid_rows) return;     // no block-level synchronisation below: safe to leave
  const uint8_t* __restrict__ W = p.w[g * p.num_parts + part];
  const float* __restrict__ WS = p.w_scale[g * p.num_parts + part];
  const int kblocks = p.k / kFp8Block;
  const float* ws_row = WS + static_cast<size_t>(n_in_part / kFp8Block) * kblocks;

  const int gq = lane / 4, c = lane % 4;
  const int r_lo = warp_row + gq, r_hi = r_lo + 8;
  const bool ok_lo = r_lo < part_valid_rows, ok_hi = r_hi < part_valid_rows;
  const uint8_t* w_lo = W + static_cast<size_t>(ok_lo ? r_lo : warp_row) * p.k + c * 32;
  const uint8_t* w_hi = W + static_cast<size_t>(ok_hi ? r_hi : warp_row) * p.k + c * 32;
  const int n_lo = part * p.part_rows + r_lo;  // output column of c0/c1 (c2/c3: n_lo + 8)

  for (int tok0 = 0; tok0 < rows; tok0 += NT * 8) {
    // Per token tile: this lane's B token (g) and the two scale/output tokens (2c, 2c+1).
    const uint8_t* b_ptr[NT];
    const float* s_ptr[NT][2];
    int out_row[NT][2];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int tb = tok0 + t * 8 + gq;
      b_ptr[t] = nullptr;
      if (tb < rows) {
        const int r = row_begin + tb;
        const int src = p.a_row_map ? p.a_row_map[r] : r;
        b_ptr[t] = p.a + static_cast<size_t>(src) * p.lda + c * 32;
      }
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int ts = tok0 + t * 8 + 2 * c + e;
        s_ptr[t][e] = nullptr;
        out_row[t][e] = -1;
        if (ts < rows) {
          const int r = row_begin + ts;
          const int src = p.a_row_map ? p.a_row_map[r] : r;
          s_ptr[t][e] = p.a_scale + static_cast<size_t>(src) * p.ld_scale;
          out_row[t][e] = r;
        }
      }
    }

    float acc[NT][4];
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][i] = 0.f;

    // Register ring of DEPTH K blocks: buf[s][0..1] = row lo bytes, buf[s][2..3] = row hi bytes.
    uint4 buf[DEPTH][4];
    auto load = [&](uint4(&dst)[4], int kb) {
      const size_t off = static_cast<size_t>(kb) * kFp8Block;
      dst[0] = ldg_stream(w_lo + off);
      dst[1] = ldg_stream(w_lo + off + 16);
      dst[2] = ldg_stream(w_hi + off);
      dst[3] = ldg_stream(w_hi + off + 16);
    };
    auto compute = [&](const uint4(&wv)[4], int kb) {
      const float ws = __ldg(ws_row + kb);
      const size_t off = static_cast<size_t>(kb) * kFp8Block;
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        uint4 b0 = make_uint4(0, 0, 0, 0), b1 = make_uint4(0, 0, 0, 0);
        if (b_ptr[t]) {
          b0 = __ldg(reinterpret_cast<const uint4*>(b_ptr[t] + off));
          b1 = __ldg(reinterpret_cast<const uint4*>(b_ptr[t] + off + 16));
        }
        float d[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint4& lo = j < 2 ? wv[0] : wv[1];
          const uint4& hi = j < 2 ? wv[2] : wv[3];
          const uint4& bb = j < 2 ? b0 : b1;
          const int w0 = (2 * j) % 4, w1 = (2 * j + 1) % 4;
          mma_e4m3_16832(d, word_of(lo, w0), word_of(hi, w0), word_of(lo, w1), word_of(hi, w1),
                         word_of(bb, w0), word_of(bb, w1));
        }
        const float s0 = s_ptr[t][0] ? __ldg(s_ptr[t][0] + kb) * ws : 0.f;
        const float s1 = s_ptr[t][1] ? __ldg(s_ptr[t][1] + kb) * ws : 0.f;
        acc[t][0] = fmaf(d[0], s0, acc[t][0]);
        acc[t][1] = fmaf(d[1], s1, acc[t][1]);
        acc[t][2] = fmaf(d[2], s0, acc[t][2]);
        acc[t][3] = fmaf(d[3], s1, acc[t][3]);
      }
    };

#pragma unroll
    for (int s = 0; s < DEPTH - 1; ++s)
      if (s < kblocks) load(buf[s], s);
    for (int kb0 = 0; kb0 < kblocks; kb0 += DEPTH) {
#pragma unroll
      for (int s = 0; s < DEPTH; ++s) {
        const int kb = kb0 + s;
        if (kb + DEPTH - 1 < kblocks) load(buf[(s + DEPTH - 1) % DEPTH], kb + DEPTH - 1);
        if (kb < kblocks) compute(buf[s], kb);
      }
    }

#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (out_row[t][e] < 0) continue;
        __nv_bfloat16* dst = p.c + static_cast<size_t>(out_row[t][e]) * p.ldc;
        if (ok_lo) dst[n_lo] = __float2bfloat16_rn(acc[t][e]);
        if (ok_hi) dst[n_lo + 8] = __float2bfloat16_rn(acc[t][2 + e]);
      }
  }
#endif
}

}  // namespace glm5rt::kernels::detail

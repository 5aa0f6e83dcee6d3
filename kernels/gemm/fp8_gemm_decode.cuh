// Decode-shaped FP8 GEMM (few rows per group): memory-bound, so the kernel's only job is to stream each
// group's weights once at full bandwidth. The weight rows are the mma's M dimension ("swap AB"): a warp
// owns 16 weight rows, each lane loads 2 x 32 contiguous bytes of them per 128-wide K block with 16-byte
// loads straight into mma operand registers (no shared memory, no dequantisation: the block scales are
// applied to the f32 partial sums once per 128-wide K block). Tokens (rows of A) are the mma's N = 8.
//
// Within one m16n8k32 the order of K does not matter as long as A and B agree. Lane (g = lane/4,
// c = lane%4) holds bytes [16c, 16c+16) and [64+16c, 64+16c+16) of its weight rows g and g+8 for the
// current K block (so each load instruction covers whole 32-byte sectors: lanes c = 0..3 read 64
// contiguous bytes of a row); mma j (0..3) takes words 2j and 2j+1 of those 32 bytes as the
// "k 4c..4c+3" and "k 16+4c..16+4c+3" registers, and the lane loads the same bytes of its token for B,
// so both sides use one permutation of K.
#pragma once

#include "kernels/gemm/fp8_common.cuh"
#include "kernels/gemm/fp8_gemm.h"
#include "kernels/gemm/launch.cuh"

namespace glm5rt::kernels::detail {

// 4 warps x 16 rows = 64 weight rows per block (inside one 128-row scale block). Small blocks and a
// register cap let up to 8 blocks share an SM, so a decode-sized problem (a few hundred blocks) runs
// as one wave over all 132 SMs instead of a full wave plus a tail.
constexpr int kDecodeWarps = 4;
constexpr int kDecodeThreads = kDecodeWarps * 32;
constexpr int kDecodeRows = kDecodeWarps * 16;
// Blocks per SM the register cap aims at. sm_90 has no native FP8 mma.sync (the compiler expands it to
// conversions + f16 mma), which needs more registers: a smaller target there avoids spills.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
template <int NT, int DEPTH>
constexpr int decode_min_blocks() { return NT == 1 ? (DEPTH == 2 ? 7 : 5) : NT == 2 ? 4 : 3; }
#else
template <int NT, int DEPTH>
constexpr int decode_min_blocks() { return NT == 1 ? (DEPTH == 2 ? 8 : 6) : NT == 2 ? 6 : 4; }
#endif

__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// The part (Fp8GemmParams::num_parts / varied_parts) that holds output column n_block, its first output
// column and its rows. The varied form walks part_begin with constant indices (kernel parameters, no
// local-memory copy).
struct DecodePart {
  int part, first, rows;
};
// GENERAL: the kernel instantiation for unequal parts and strided weights (Fp8GemmParams::varied_parts,
// ldw, ld_wscale); the others keep the plain equal-parts code (and its register allocation).
template <bool GENERAL>
__device__ __forceinline__ DecodePart decode_part_of(const Fp8GemmParams& p, int n_block) {
  if (!GENERAL || !p.varied_parts) {
    const int part = n_block / p.part_rows;
    return {part, part * p.part_rows, min(p.part_rows, p.n - part * p.part_rows)};
  }
  int part = 0, first = 0, end = p.part_begin[1];
#pragma unroll
  for (int i = 1; i < kFp8MaxVariedParts; ++i)
    if (i < p.num_parts && n_block >= p.part_begin[i]) {
      part = i;
      first = p.part_begin[i];
      end = p.part_begin[i + 1];
    }
  return {part, first, end - first};
}

// A warp's 16 weight rows from warp_row (inside part dp of group g; n_in_part: the block's first row in the
// part) and this lane's share of them in the m16n8k32 fragments: rows gq and gq + 8 of the warp (ok_lo /
// ok_hi: inside the part), bytes 16 c of each 64-byte half of a K block. Shared by the register
// (fp8_gemm_decode_kernel) and cp.async (fp8_gemm_decode_async_kernel) forms, called once the warp is known
// to have rows. The kernels form the activation base p.a + 16 c themselves: computed here, it cost the
// sm_90 PTX its 32-bit (K offset | 16 c) fold.
struct DecodeWarpRows {
  const uint8_t* __restrict__ W;  // the part's weights
  int kblocks;
  int ldw;                        // weight row stride: a K slice of a wider weight has that weight's
  const float* ws_row;            // scale_inv row of the warp's 128 rows
  int gq, c;
  bool ok_lo, ok_hi;
  // One 64-bit base and two 32-bit offsets (rows past the end read row warp_row, never stored): fewer
  // registers, so that more warps fit on an SM.
  const uint8_t* w_base;
  int off_lo, off_hi;
  int n_lo;  // output column of c0/c1 (c2/c3: n_lo + 8)
};
template <bool GENERAL>
__device__ __forceinline__ DecodeWarpRows decode_warp_rows(const Fp8GemmParams& p, int g, const DecodePart& dp,
                                                           int n_in_part, int warp_row, int lane) {
  DecodeWarpRows r;
  r.W = p.w[g * p.num_parts + dp.part];
  const float* __restrict__ WS = p.w_scale[g * p.num_parts + dp.part];
  r.kblocks = p.k / kFp8Block;
  r.ldw = GENERAL && p.ldw ? p.ldw : p.k;
  r.ws_row = WS + static_cast<size_t>(n_in_part / kFp8Block) * (GENERAL && p.ld_wscale ? p.ld_wscale : r.kblocks);
  r.gq = lane / 4;
  r.c = lane % 4;
  const int r_lo = warp_row + r.gq, r_hi = r_lo + 8;
  r.ok_lo = r_lo < dp.rows;
  r.ok_hi = r_hi < dp.rows;
  r.w_base = r.W + static_cast<size_t>(warp_row) * r.ldw + r.c * 16;
  r.off_lo = r.ok_lo ? r.gq * r.ldw : 0;
  r.off_hi = r.ok_hi ? (r.gq + 8) * r.ldw : 0;
  r.n_lo = dp.first + r_lo;
  return r;
}

// One K block of a warp's 16 rows x 8 tokens: the four m16n8k32 products into d (zeroed first). wv: the
// lane's weight bytes (wv[0..1] row lo, wv[2..3] row hi, 64-byte halves), b0 / b1 its token's two halves.
__device__ __forceinline__ void decode_kblock_mma(float (&d)[4], const uint4 (&wv)[4], const uint4& b0, const uint4& b1) {
#pragma unroll
  for (int i = 0; i < 4; ++i) d[i] = 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint4& lo = j < 2 ? wv[0] : wv[1];
    const uint4& hi = j < 2 ? wv[2] : wv[3];
    const uint4& bb = j < 2 ? b0 : b1;
    const int w0 = (2 * j) % 4, w1 = (2 * j + 1) % 4;
    mma_e4m3_16832(d, word_of(lo, w0), word_of(hi, w0), word_of(lo, w1), word_of(hi, w1), word_of(bb, w0),
                   word_of(bb, w1));
  }
}

// NT: token tiles of 8 per pass (rows of A held at once); DEPTH: K blocks of weights in flight per lane.
template <int NT, int DEPTH, bool GENERAL = false>
__global__ void __launch_bounds__(kDecodeThreads, decode_min_blocks<NT, DEPTH>())
    fp8_gemm_decode_kernel(const Fp8GemmParams p) {
#if GLM5RT_HAS_FP8_MMA
  pdl_wait_and_release();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int g = 0, row_begin = 0, rows = p.max_rows;
  if (p.group_offsets) {
    if (static_cast<int>(blockIdx.y) >= *p.num_active) return;
    g = p.active_groups[blockIdx.y];
    row_begin = p.group_offsets[g];
    rows = p.group_offsets[g + 1] - row_begin;
  }
  if (rows <= 0) return;
  const int n_block = blockIdx.x * kDecodeRows;
  const DecodePart dp = decode_part_of<GENERAL>(p, n_block);
  const int n_in_part = n_block - dp.first;
  const int part_valid_rows = dp.rows;
  const int warp_row = n_in_part + warp * 16;  // first weight row (within the part) of this warp
  if (warp_row >= part_valid_rows) return;     // no block-level synchronisation below: safe to leave
  const DecodeWarpRows wr = decode_warp_rows<GENERAL>(p, g, dp, n_in_part, warp_row, lane);
  const uint8_t* a_base = p.a + wr.c * 16;

  for (int tok0 = 0; tok0 < rows; tok0 += NT * 8) {
    // Per token tile: source row of this lane's B token (g) and of the two scale tokens (2c, 2c+1).
    int b_src[NT], s_src[NT][2];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int tb = tok0 + t * 8 + wr.gq;
      b_src[t] = tb < rows ? (p.a_row_map ? p.a_row_map[row_begin + tb] : row_begin + tb) : -1;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int ts = tok0 + t * 8 + 2 * wr.c + e;
        s_src[t][e] = ts < rows ? (p.a_row_map ? p.a_row_map[row_begin + ts] : row_begin + ts) : -1;
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
      const uint8_t* w = wr.w_base + static_cast<size_t>(kb) * kFp8Block;
      dst[0] = ldg_stream(w + wr.off_lo);
      dst[1] = ldg_stream(w + wr.off_lo + 64);
      dst[2] = ldg_stream(w + wr.off_hi);
      dst[3] = ldg_stream(w + wr.off_hi + 64);
    };
    auto compute = [&](const uint4(&wv)[4], int kb) {
      const float ws = __ldg(wr.ws_row + kb);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        uint4 b0 = make_uint4(0, 0, 0, 0), b1 = make_uint4(0, 0, 0, 0);
        if (b_src[t] >= 0) {
          const uint8_t* b = a_base + static_cast<size_t>(b_src[t]) * p.lda + kb * kFp8Block;
          b0 = __ldg(reinterpret_cast<const uint4*>(b));
          b1 = __ldg(reinterpret_cast<const uint4*>(b + 64));
        }
        float d[4];
        decode_kblock_mma(d, wv, b0, b1);
        const float s0 = s_src[t][0] >= 0 ? __ldg(p.a_scale + static_cast<size_t>(s_src[t][0]) * p.ld_scale + kb) * ws : 0.f;
        const float s1 = s_src[t][1] >= 0 ? __ldg(p.a_scale + static_cast<size_t>(s_src[t][1]) * p.ld_scale + kb) * ws : 0.f;
        acc[t][0] = fmaf(d[0], s0, acc[t][0]);
        acc[t][1] = fmaf(d[1], s1, acc[t][1]);
        acc[t][2] = fmaf(d[2], s0, acc[t][2]);
        acc[t][3] = fmaf(d[3], s1, acc[t][3]);
      }
    };

#pragma unroll
    for (int s = 0; s < DEPTH - 1; ++s)
      if (s < wr.kblocks) load(buf[s], s);
    for (int kb0 = 0; kb0 < wr.kblocks; kb0 += DEPTH) {
#pragma unroll
      for (int s = 0; s < DEPTH; ++s) {
        const int kb = kb0 + s;
        if (kb + DEPTH - 1 < wr.kblocks) load(buf[(s + DEPTH - 1) % DEPTH], kb + DEPTH - 1);
        if (kb < wr.kblocks) compute(buf[s], kb);
      }
    }

#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int ts = tok0 + t * 8 + 2 * wr.c + e;
        if (ts >= rows) continue;
        __nv_bfloat16* dst = p.c + static_cast<size_t>(row_begin + ts) * p.ldc;
        if (wr.ok_lo) dst[wr.n_lo] = __float2bfloat16_rn(acc[t][e]);
        if (wr.ok_hi) dst[wr.n_lo + 8] = __float2bfloat16_rn(acc[t][2 + e]);
      }
  }
#endif
}

}  // namespace glm5rt::kernels::detail

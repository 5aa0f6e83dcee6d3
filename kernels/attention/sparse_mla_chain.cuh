// Session 4 (mla-chain): a shorter per-step consumer chain for the warp-specialized kernel (kernel_variant 5,
// bf16 records; opt-in, GLM5RT_MLA_V5_CHAIN=1). MEASURED SLOWER (docs/PERFORMANCE.md, "Session 4 (mla-chain)"):
// 254 vs 221 us at T=128 H=64, 7.86 vs 6.88 ms at prefill 4096 x 64, equal elsewhere; kept for the record and
// as the base of further tries, not used by default. Per 16-token step a consumer group (4 warps,
// kHG heads) ran: GEMM1 (two accumulator chains 9 MMAs deep) -> partials to smem -> barrier -> softmax by
// 8 / 16 threads per head -> P^T and alpha to smem -> barrier -> ldmatrix P -> GEMM2. Here:
//   - GEMM1 keeps 3 accumulator sets per head tile (chains 3 MMAs deep instead of 9), summed at the end;
//   - the partials are stored as float2 into a layout that gives each lane, in one float4 per (k quarter,
//     head), exactly the 4 tokens its GEMM2 B fragment needs (tokens 2tq, 2tq + 8, 2tq + 1, 2tq + 9);
//   - EVERY warp of the group computes the softmax of all kHG heads itself (lane (g, tq): heads g, g + 8,
//     4 tokens each; the max over the 4 lanes of a head in 2 shuffles) and packs P^T straight into its
//     GEMM2 B fragments in registers: no P / alpha round trip through shared memory and no second barrier.
//     All 4 warps compute bit-identical values from the same partials, so their running maxima agree.
//   - with one barrier per step a fast warp's next GEMM1 stores could overwrite partials a slow warp still
//     reads: the partials are double-buffered by step parity (the barrier of step s + 1 separates the reads
//     of step s from the stores of step s + 2).
#pragma once

#include "kernels/attention/sparse_mla_common.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

// Partials [kq][head][16], token t of head h at float4 group ((t & 7) >> 1) ^ ((h >> 1) & 3), element
// ((t & 1) << 1) | (t >> 3). The group swizzle halves the bank conflicts of GEMM1's float2 stores (lanes
// 4 tq x 2 g>>1 of a half-warp: 2-way instead of 4-way); the float4 reads stay conflict-free.
template <int NH>
__device__ __forceinline__ int chain_spart_off(int kq, int h, int grp, int j) {
  return (kq * NH + h) * 16 + ((grp ^ ((h >> 1) & 3)) << 2) + j;
}

__device__ __forceinline__ float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// GEMM1 partial of a 16-token step over this warp's KSTEPS k16 steps (k quarter kq), all NTW head tiles,
// 3 independent accumulator sets per tile; stored to spart (chain layout) for the group's softmax.
template <int NH, int KSTEPS, int NTW>
__device__ __forceinline__ void qk_chain_step(const uint32_t (&qf)[KSTEPS][NTW][2], uint32_t tile_addr,
                                              int row_bytes, int kq, int lane, float* spart) {
  constexpr int kSets = 3;
  float s[kSets][NTW][4];
#pragma unroll
  for (int c = 0; c < kSets; ++c)
#pragma unroll
    for (int nt = 0; nt < NTW; ++nt) s[c][nt][0] = s[c][nt][1] = s[c][nt][2] = s[c][nt][3] = 0.f;
  const uint32_t a_base = qk_a_base(tile_addr, row_bytes, kq, KSTEPS, lane);
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks) {
    uint32_t af[4];
    mma::ldmatrix_x4(af, a_base + ks * 32);
#pragma unroll
    for (int nt = 0; nt < NTW; ++nt) mma::mma_bf16_16816(s[ks % kSets][nt], af, qf[ks][nt][0], qf[ks][nt][1]);
  }
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NTW; ++nt) {
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = (s[0][nt][e] + s[1][nt][e]) + s[2][nt][e];
    // c0 (tok g, head h), c1 (g, h + 1), c2 (g + 8, h), c3 (g + 8, h + 1): tokens g and g + 8 are adjacent.
    const int h = nt * 8 + 2 * tq;
    const int grp = g >> 1, j = (g & 1) << 1;
    *reinterpret_cast<float2*>(spart + chain_spart_off<NH>(kq, h, grp, j)) = make_float2(v[0], v[2]);
    *reinterpret_cast<float2*>(spart + chain_spart_off<NH>(kq, h + 1, grp, j)) = make_float2(v[1], v[3]);
  }
}

// Online softmax of one step for the group's NT * 8 heads, done by every warp: lane (g, tq) owns heads
// g + 8 i (i < NT), tokens 2tq, 2tq + 1, 2tq + 8, 2tq + 9. Writes GEMM2's B fragments bfr[i] (P^T of head
// tile i: b0 = tokens 2tq, 2tq + 1; b1 = 2tq + 8, 2tq + 9), the rescale factors al[i] of heads g + 8 i, and
// updates m_run[i] (identical on the 4 lanes of a head) and l_run[i] (this lane's share: its 4 tokens).
template <int NT>
__device__ __forceinline__ void softmax_chain_step(const float* spart, const int* sidx, float scale_log2, int lane,
                                                   uint32_t (&bfr)[NT][2], float (&al)[NT], float (&m_run)[NT],
                                                   float (&l_run)[NT]) {
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr int NH = NT * 8;
  const int g = lane >> 2, tq = lane & 3;
  const int2 i01 = *reinterpret_cast<const int2*>(sidx + 2 * tq);      // tokens 2tq, 2tq + 1
  const int2 i89 = *reinterpret_cast<const int2*>(sidx + 2 * tq + 8);  // tokens 2tq + 8, 2tq + 9
  // element j of a float4: j = 0 tok 2tq, 1 tok 2tq + 8, 2 tok 2tq + 1, 3 tok 2tq + 9
  const bool ok[4] = {i01.x >= 0, i89.x >= 0, i01.y >= 0, i89.y >= 0};
  float sv[NT][4];
#pragma unroll
  for (int i = 0; i < NT; ++i) {
    const int h = g + 8 * i;
    float4 x[4];
#pragma unroll
    for (int kq = 0; kq < 4; ++kq) x[kq] = *reinterpret_cast<const float4*>(spart + chain_spart_off<NH>(kq, h, tq, 0));
    const float v[4] = {(x[0].x + x[1].x) + (x[2].x + x[3].x), (x[0].y + x[1].y) + (x[2].y + x[3].y),
                        (x[0].z + x[1].z) + (x[2].z + x[3].z), (x[0].w + x[1].w) + (x[2].w + x[3].w)};
#pragma unroll
    for (int j = 0; j < 4; ++j) sv[i][j] = ok[j] ? v[j] * scale_log2 : kNegInf;
  }
  float mx[NT];
#pragma unroll
  for (int i = 0; i < NT; ++i) mx[i] = fmaxf(fmaxf(sv[i][0], sv[i][1]), fmaxf(sv[i][2], sv[i][3]));
#pragma unroll
  for (int off = 1; off < 4; off <<= 1)
#pragma unroll
    for (int i = 0; i < NT; ++i) mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], off));
#pragma unroll
  for (int i = 0; i < NT; ++i) {
    const float mn = fmaxf(m_run[i], mx[i]);
    // A head with nothing valid so far keeps max -inf; subtract 0 then so that exp2 gives 0, not NaN.
    const float mu = mn == kNegInf ? 0.f : mn;
    al[i] = ex2_ftz(m_run[i] - mu);
    m_run[i] = mn;
    float p[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) p[j] = __bfloat162float(__float2bfloat16(ex2_ftz(sv[i][j] - mu)));
    // sum the rounded probabilities: exactly what GEMM2 multiplies V with
    l_run[i] = l_run[i] * al[i] + ((p[0] + p[1]) + (p[2] + p[3]));
    bfr[i][0] = mma::pack_bf16x2(p[0], p[2]);
    bfr[i][1] = mma::pack_bf16x2(p[1], p[3]);
  }
}

// Rescale the O^T accumulators (heads nt * 8 + 2tq, + 1 of this lane) by the alphas that lanes (2tq) * 4 and
// (2tq + 1) * 4 computed; skipped when no head of the group moved its max (most steps once maxima settle).
template <int MT, int NT>
__device__ __forceinline__ void rescale_chain(float (&acc)[MT][NT][4], const float (&al)[NT], int lane) {
  bool moved = false;
#pragma unroll
  for (int i = 0; i < NT; ++i) moved |= al[i] != 1.f;
  if (!__any_sync(0xffffffffu, moved)) return;
  const int tq = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const float a0 = __shfl_sync(0xffffffffu, al[nt], (2 * tq) << 2);
    const float a1 = __shfl_sync(0xffffffffu, al[nt], (2 * tq + 1) << 2);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      acc[mt][nt][0] *= a0;
      acc[mt][nt][1] *= a1;
      acc[mt][nt][2] *= a0;
      acc[mt][nt][3] *= a1;
    }
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail

// Sparse MLA kernel variant 16, 16-head form (session 28): FP8 (656-byte) records, 16 heads per CTA (GLM-5 under
// 4-way tensor parallelism), two warps per 16-token step splitting its latent dimensions. Why: at 16 heads variant 7
// ran FP8 records slower than bf16 ones (T=128 91.6 against 79.1 us, prefill 4096 x 16 2,307 / 1,812; record e81ce04),
// and variant 16's 8-head step cannot take 16 heads in one warp (its O^T accumulators would be 256 registers per
// lane). A first form gave each warp of a pair the whole step for 8 of the heads (commit 416b13a): both warps then
// converted the same K to f16 and built the same V fragments, and it ran T=128 in 87.5 us (H200, docs/PERFORMANCE.md
// "Session 28, call 1"), the per-SM work of H=8 doubled. Here warp `half` of a pair takes latent dims 256 half ..
// 256 half + 255 (scale blocks 2 half, 2 half + 1) and rope k-steps 2 half, 2 half + 1, for all 16 heads:
//   GEMM1  partial S[16 tok x 16 heads] over its dims (f16 MMAs on K converted by cvt.rn.f16x2.e4m3x2, Q stored once
//          as f16 in shared memory, two n8 tiles per A fragment), each block's partial times its token's scale;
//   exchange  the partial C fragments through shared memory (two float4 per lane), a 64-thread named barrier, each
//          warp adding the other's: both then hold the same S (a + b == b + a in IEEE arithmetic), and both run the
//          same softmax for the 16 heads (variant 16's lazy frame per n8 tile);
//   GEMM2  O^T[its 256 dims x 16 heads] += V^T P_b over its two scale blocks (16 m16 tiles x 2 n8 tiles = 128 fp32
//          accumulators per lane, as the 8-head form's).
// So a record's conversion and V fragments are built once per CTA, as at 8 heads. Gather as the 8-head form's
// self-gathering one: each warp copies half a step's records (one bulk copy per record) into one of its pair's three
// slots, every lane of both warps arriving on the slot's "full" mbarrier; the pair meets at its named barrier again
// after GEMM2 before either refills the slot just read. Four warps (two pairs), two CTAs per SM on H100 / H200, one
// on SM120 (<= 99 KB). Precision as variant 16's (K, V exact in the MMAs; Q exact in f16; P_b rounded once to bf16).
#pragma once

#include "kernels/attention/sparse_mla_wsf_kernel.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

struct Wsf16Cfg {
  static constexpr int kHC = 16;
  static constexpr int kPairs = 2;
  static constexpr int kThreads = kPairs * 64;
  static constexpr int kBT = 16;
  static constexpr int kPairSlots = 3;
  static constexpr int kRowBytes = WsfCfg<4, true>::kRowBytes;
  static constexpr int kSlotBytes = kBT * kRowBytes;
  static constexpr int kRing = kPairs * kPairSlots;
  static constexpr int kQRowBytes = WsfCfg<4, true>::kQRowBytes;
  static constexpr int kOffQ = kRing * kSlotBytes;
  static constexpr int kOffIdx = kOffQ + kHC * kQRowBytes;
  static constexpr int kOffBar = kOffIdx + kMaxSplitEntries * 4;
  static constexpr int kOffX = kOffBar + kRing * 8;                // per pair and warp: 32 lanes x 8 partial scores
  static constexpr int kOffMl = kOffX + kPairs * 2 * 32 * 8 * 4;  // per pair and head: max, sum
  static constexpr int kOffLse = kOffMl + kPairs * kHC * 2 * 4;
  static constexpr int kSmemBytes = kOffLse + kHC * 4;
  // The merge's per-pair O buffers (fp32, the epilogue's staging layout) reuse the ring and Q.
  static constexpr int kMergeBufFloats = kHC * kStgStride;
  static_assert(kPairs * kMergeBufFloats * 4 <= kOffIdx, "merge buffers must fit in the ring and Q");
  static_assert(kSmemBytes <= 99 * 1024, "fits SM120's 99 KB per block");
  static_assert(kOffQ % 16 == 0 && kOffIdx % 16 == 0 && kOffBar % 8 == 0 && kOffX % 16 == 0, "alignment");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
  static constexpr int kMinBlocks = 1;
#else
  static constexpr int kMinBlocks = 2;
#endif
};

// (A template on its configuration, Wsf16Cfg, so that only sparse_mla_wsf16_fp8.cu instantiates it.)
template <class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks) sparse_mla_wsf16_kernel(const KernelArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using namespace mma;
  constexpr int GS = C::kPairSlots;
  constexpr int kLR = C::kRowBytes;
  constexpr float kNegInf = -__builtin_huge_valf();
  extern __shared__ __align__(16) uint8_t smem[];

  wait_for_predecessor();  // before any global access (PDL)
  const CtaPlace place = cta_place<16>(a);
  const int hg = place.hg, split = place.split, t = place.t;
  const RowCache rc = row_cache(a, t);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const int pair = warp >> 1, half = warp & 1;  // steps pair, pair + kPairs, ...; dims 256 half .. 256 half + 255
  allow_dependent_launch();  // the combine kernel (PDL)

  const SplitSpan span = split_span<C::kBT>(a, t, split);
  const int nsteps = span.nsteps;
  const int32_t* row_idx = a.indices + static_cast<int64_t>(t) * a.topk;
  const __nv_bfloat16* q_g = a.q + (static_cast<int64_t>(t) * a.num_heads + hg * 16) * kMlaQkDim;

  // Prologue: the split's indices (cleaned), Q's latent part as f16 rows, the ring's mbarriers.
  int* s_idx = reinterpret_cast<int*>(smem + C::kOffIdx);
  stage_split_indices<C::kThreads>(s_idx, row_idx, span, nsteps * C::kBT, rc.num_slots, tid);
  stage_q_latent_f16<16, C::kThreads, C::kOffQ, C::kQRowBytes>(smem, q_g, tid);
  const uint32_t bar_full = smem_addr(smem + C::kOffBar);
  if (tid == 0)
    for (int s = 0; s < C::kRing; ++s) mbar_init(bar_full + s * 8, 64);  // every lane of the pair, once per fill
  __syncthreads();

  // The pair's k-th step (pair + k kPairs) into its slot GS pair + k % GS: this warp copies rows 8 half .. 8 half + 7.
  auto issue = [&](int k) {
    const int step = pair + k * C::kPairs;
    if (step < nsteps) {
      const int slot = GS * pair + k % GS;
      const bool act = lane < 8;
      const int r = 8 * half + (act ? lane : 0);
      wsf_copy_row(smem + slot * C::kSlotBytes + r * kLR, act ? s_idx[step * C::kBT + r] : -1, act, rc.base,
                   bar_full + slot * 8, lane);
    }
  };

  // Q's rope fragments for this warp's two rope k-steps (bf16, GEMM1's B: head 8 nt + g, dims 512 + 16 ks + 2t (+ 8)).
  uint32_t qr[2][2][2];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const uint32_t* qrow = reinterpret_cast<const uint32_t*>(q_g + (8 * nt + g) * kMlaQkDim + kMlaLatentDim);
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      const int ks = 2 * half + kk;
      qr[nt][kk][0] = __ldg(qrow + 8 * ks + tq);
      qr[nt][kk][1] = __ldg(qrow + 8 * ks + tq + 4);
    }
  }
  const uint8_t* q_s = smem + C::kOffQ + g * C::kQRowBytes + 16 * tq;  // head g (+ 8 nt), 8 values per chunk
  const int tok_a = wsf_token(g), tok_b = 8 + tok_a;
  const int lrow = (lane & 7), ltok = ((lane >> 3) & 1) * 8 + wsf_token(lrow);
  const uint32_t rope_off = ltok * kLR + kMlaFp8ScaleOffset + 16 + (lane >> 4) * 16 + half * 64;
  const int blk0 = 2 * half;  // this warp's first scale block
  float4* x_own = reinterpret_cast<float4*>(smem + C::kOffX) + ((pair * 2 + half) * 32 + lane) * 2;
  const float4* x_other = reinterpret_cast<const float4*>(smem + C::kOffX) + ((pair * 2 + (half ^ 1)) * 32 + lane) * 2;

  float acc[16][2][4];  // O^T tile mt of n8 tile nt: dims 256 half + 32 (mt / 2) + 4 g + 2 (mt % 2) + {0, 1}
  zero_acc(acc);
  float m[2][2] = {{kNegInf, kNegInf}, {kNegInf, kNegInf}};  // running maxima of heads 8 nt + 2t (+ 1)
  float l[2][2] = {{0.f, 0.f}, {0.f, 0.f}};                  // this lane's share of their sums

  issue(0);
  issue(1);
  issue(2);
  int k = 0;  // this pair's steps so far
  for (int step = pair; step < nsteps; step += C::kPairs, ++k) {
    const int slot = GS * pair + k % GS;
    mbar_wait_parity(bar_full + slot * 8, (k / GS) & 1);
    const uint8_t* lat = smem + slot * C::kSlotBytes;
    const uint8_t* ra = lat + tok_a * kLR + 8 * tq;
    const uint8_t* rb = lat + tok_b * kLR + 8 * tq;

    // GEMM1 over this warp's two scale blocks and two rope k-steps: one accumulator chain per (block, n8 tile).
    float cb[2][2][4], cr[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      cr[nt][0] = cr[nt][1] = cr[nt][2] = cr[nt][3] = 0.f;
#pragma unroll
      for (int bb = 0; bb < 2; ++bb) cb[bb][nt][0] = cb[bb][nt][1] = cb[bb][nt][2] = cb[bb][nt][3] = 0.f;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int bb = 0; bb < 2; ++bb) {
        const int off = 128 * (blk0 + bb) + 32 * j;
        const uint2 w = *reinterpret_cast<const uint2*>(ra + off);
        const uint2 u = *reinterpret_cast<const uint2*>(rb + off);
        const uint32_t a0[4] = {e4m3x2_to_f16x2(w.x), e4m3x2_to_f16x2(u.x), e4m3x2_to_f16x2(w.x >> 16),
                                e4m3x2_to_f16x2(u.x >> 16)};
        const uint32_t a1[4] = {e4m3x2_to_f16x2(w.y), e4m3x2_to_f16x2(u.y), e4m3x2_to_f16x2(w.y >> 16),
                                e4m3x2_to_f16x2(u.y >> 16)};
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const uint4 qv = *reinterpret_cast<const uint4*>(q_s + nt * 8 * C::kQRowBytes + off * 2);
          mma_f16_16816(cb[bb][nt], a0, qv.x, qv.y);
          mma_f16_16816(cb[bb][nt], a1, qv.z, qv.w);
        }
      }
    }
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      uint32_t ar[4];
      ldmatrix_x4(ar, smem_addr(lat) + rope_off + kk * 32);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) mma_bf16_16816(cr[nt], ar, qr[nt][kk][0], qr[nt][kk][1]);
    }
    const float2 sa = *reinterpret_cast<const float2*>(lat + tok_a * kLR + kMlaFp8ScaleOffset + 8 * half);
    const float2 sb = *reinterpret_cast<const float2*>(lat + tok_b * kLR + kMlaFp8ScaleOffset + 8 * half);
    float x[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      x[nt][0] = cr[nt][0] + cb[0][nt][0] * sa.x + cb[1][nt][0] * sa.y;
      x[nt][1] = cr[nt][1] + cb[0][nt][1] * sa.x + cb[1][nt][1] * sa.y;
      x[nt][2] = cr[nt][2] + cb[0][nt][2] * sb.x + cb[1][nt][2] * sb.y;
      x[nt][3] = cr[nt][3] + cb[0][nt][3] * sb.x + cb[1][nt][3] * sb.y;
    }
    // The pair's two halves of S: publish this warp's, add the other's (the same sum in both warps).
    x_own[0] = make_float4(x[0][0], x[0][1], x[0][2], x[0][3]);
    x_own[1] = make_float4(x[1][0], x[1][1], x[1][2], x[1][3]);
    named_bar_sync(2 + pair, 64);
    {
      const float4 o0 = x_other[0], o1 = x_other[1];
      x[0][0] += o0.x, x[0][1] += o0.y, x[0][2] += o0.z, x[0][3] += o0.w;
      x[1][0] += o1.x, x[1][1] += o1.y, x[1][2] += o1.z, x[1][3] += o1.w;
    }

    // Softmax per n8 tile: mask, the heads' maxima over the 16 tokens, the lazy frame.
    const bool oka = s_idx[step * C::kBT + tok_a] >= 0, okb = s_idx[step * C::kBT + tok_b] >= 0;
    float p[2][4], al[2][2];
    bool rescale = false;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      float mx0, mx1, mu0, mu1;
      mask_scores_head_max(x[nt], oka, okb, a.scale_log2, mx0, mx1);
      lazy_frame(mx0, mx1, m[nt][0], m[nt][1], mu0, mu1, al[nt][0], al[nt][1]);
      p[nt][0] = fast_exp2(x[nt][0] - mu0);
      p[nt][1] = fast_exp2(x[nt][1] - mu1);
      p[nt][2] = fast_exp2(x[nt][2] - mu0);
      p[nt][3] = fast_exp2(x[nt][3] - mu1);
      l[nt][0] = l[nt][0] * al[nt][0] + (p[nt][0] + p[nt][2]);
      l[nt][1] = l[nt][1] * al[nt][1] + (p[nt][1] + p[nt][3]);
      rescale |= al[nt][0] != 1.f || al[nt][1] != 1.f;
    }
    if (__any_sync(0xffffffffu, rescale)) {
#pragma unroll
      for (int mt = 0; mt < 16; ++mt)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          acc[mt][nt][0] *= al[nt][0];
          acc[mt][nt][1] *= al[nt][1];
          acc[mt][nt][2] *= al[nt][0];
          acc[mt][nt][3] *= al[nt][1];
        }
    }

    // P_b of this warp's two scale blocks, transposed into GEMM2's B fragments (as the 8-head form's).
    uint32_t pb[2][2][2];
#pragma unroll
    for (int bb = 0; bb < 2; ++bb) {
      const float s_a = bb ? sa.y : sa.x, s_b = bb ? sb.y : sb.x;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const float w0 = p[nt][0] * kTwoPow112, w1 = p[nt][1] * kTwoPow112;
        const float w2 = p[nt][2] * kTwoPow112, w3 = p[nt][3] * kTwoPow112;
        pb[bb][nt][0] = movmatrix_trans(pack_bf16x2(w0 * s_a, w1 * s_a));
        pb[bb][nt][1] = movmatrix_trans(pack_bf16x2(w2 * s_b, w3 * s_b));
      }
    }

    // GEMM2: this warp's 8 groups of 32 dims, two m16 tiles x two n8 tiles each.
    const uint8_t* vb = lat + tq * kLR + 4 * g + 256 * half;
#pragma unroll
    for (int lg = 0; lg < 8; ++lg) {
      uint32_t ax[4], ay[4];
      fp8_v_fragments<kLR>(vb + lg * 32, ax, ay);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        mma_bf16_16816(acc[2 * lg][nt], ax, pb[lg >> 2][nt][0], pb[lg >> 2][nt][1]);
        mma_bf16_16816(acc[2 * lg + 1][nt], ay, pb[lg >> 2][nt][0], pb[lg >> 2][nt][1]);
      }
    }
    // Both warps done with the slot (and with the exchanged scores): refill it (wsf_copy_row fences first).
    named_bar_sync(2 + pair, 64);
    issue(k + GS);
  }

  // The pair's sums over the g lanes (the same in both warps); the pair's (max, sum) per head -> shared memory.
  float* ml_s = reinterpret_cast<float*>(smem + C::kOffMl);
  float* lse_s = reinterpret_cast<float*>(smem + C::kOffLse);
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
      l[nt][0] += __shfl_xor_sync(0xffffffffu, l[nt][0], o);
      l[nt][1] += __shfl_xor_sync(0xffffffffu, l[nt][1], o);
    }
  if (half == 0 && g == 0)
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int h = 8 * nt + 2 * tq + i;
        ml_s[(pair * 16 + h) * 2] = m[nt][i];
        ml_s[(pair * 16 + h) * 2 + 1] = l[nt][i];
      }
  __syncthreads();  // every pair's (max, sum) written, every warp past its last step (the ring and Q are free)
  float f[2][2];  // this pair's weights for heads 8 nt + 2t (+ 1)
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int h = 8 * nt + 2 * tq + i;
      float mm = kNegInf;
#pragma unroll
      for (int pr = 0; pr < C::kPairs; ++pr) mm = fmaxf(mm, ml_s[(pr * 16 + h) * 2]);
      float s = 0.f;
#pragma unroll
      for (int pr = 0; pr < C::kPairs; ++pr) {
        const float mw = ml_s[(pr * 16 + h) * 2];
        s += mw == kNegInf ? 0.f : ml_s[(pr * 16 + h) * 2 + 1] * fast_exp2(mw - mm);
      }
      const float inv = s > 0.f ? 1.f / s : 0.f;
      f[nt][i] = m[nt][i] == kNegInf ? 0.f : fast_exp2(m[nt][i] - mm) * (inv * 256.f);  // 256: 2^112 against 2^-120
      if (pair == 0 && half == 0 && g == 0) lse_s[h] = s > 0.f ? mm + log2f(s) : kNegInf;
    }
  // This warp's O, weighted, into its pair's merge buffer at its dims.
  float* buf = reinterpret_cast<float*>(smem) + pair * C::kMergeBufFloats;
#pragma unroll
  for (int mt = 0; mt < 16; ++mt) {
    const int d = 256 * half + 32 * (mt >> 1) + 4 * g + 2 * (mt & 1);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const int h0 = 8 * nt + 2 * tq;
      *reinterpret_cast<float2*>(buf + h0 * kStgStride + d) =
          make_float2(acc[mt][nt][0] * f[nt][0], acc[mt][nt][2] * f[nt][0]);
      *reinterpret_cast<float2*>(buf + (h0 + 1) * kStgStride + d) =
          make_float2(acc[mt][nt][1] * f[nt][1], acc[mt][nt][3] * f[nt][1]);
    }
  }
  __syncthreads();
  float* stg = reinterpret_cast<float*>(smem);
  sum_merge_buffers<16, C::kThreads, C::kPairs, C::kMergeBufFloats>(stg, tid);
  __syncthreads();
  write_outputs<16, C::kThreads>(a, stg, lse_s, t, hg, split, tid);
#endif
}

}  // namespace glm5rt::kernels::sparse_mla_detail

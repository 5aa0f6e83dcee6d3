// Sparse MLA kernel variant 16 (session 26): FP8 (656-byte) records, 8 heads per CTA, each consumer warp running
// whole 16-token steps by itself. Why: at 8 heads (GLM-5 under 8-way tensor parallelism) variant 7 splits every step
// over its four warps, which then meet at three block barriers per step (partial scores, P, the next slot) and
// repeat per warp the bookkeeping a step needs (index loads, the gather's addresses, the rescale): 399 instructions
// per warp and step on sm_90, ~1,600 per step, with ~45% of the issue slots used; over L2-resident records it is
// only 7% faster than from DRAM (H200, docs/PERFORMANCE.md "Session 26, calls 1-2"), so its step, not the memory,
// bounds FP8 at 8 heads. Here a step costs one warp ~800 instructions and no block barrier. Two forms of the gather:
//   self-gathering (session 27; H100 / H200)  four consumer warps, no producer: warp w copies its own steps into two
//                  slots of its own, one bulk copy per record (lanes 0-15), its step k + 2 issued when it finishes
//                  step k, a "full" mbarrier per slot (32 arrivals). Why: a bulk copy issued from per-lane operands
//                  costs its warp ~60 clocks (the lane loop: the copy engine reads the uniform registers before the
//                  next copy may rewrite them), so one producer warp per CTA issued too few copies: session 26's
//                  kernel waited for its records 41% of its consumers' time (H200 profile, docs/PERFORMANCE.md
//                  "Session 27"). 101 KB of shared memory, two CTAs per SM.
//   producer warp (session 26; where a block gets <= 99 KB: SM120)  three consumer warps and a producer warp that
//                  copies every step into a 7-slot ring, a "full" mbarrier per slot (32 arrivals: every producer lane)
//                  and an "empty" one (32 arrivals: every lane of the one warp that read the slot).
//   Ring rows: 16 per slot, of 672 bytes (the record and 16 bytes: 168 words, 8 banks apart).
//   consumer warp w  steps w, w + NW, w + 2 NW, ... of the split, each with its own online softmax and O accumulators:
//     GEMM1  S[16 tok x 8 heads] (tokens on the MMA M side) over the 512 latent values as four 128-value scale
//            blocks, f16 MMAs on K converted by cvt.rn.f16x2.e4m3x2 (exact) and Q stored once as f16 in shared
//            memory (variant 7's permuted k order: 8 bytes of a row per lane), each block's partial times its
//            token's scale; the rope part a bf16 MMA on ldmatrix fragments, Q's rope fragments in registers.
//            A-fragment row i holds token sigma(i) (rows 2k / 2k + 1 = tokens k / k + 4 of each half), so that the
//            transposed P fragments come out in GEMM2's token order.
//     softmax  on the C fragments (lane (g, t): tokens sigma(g), 8 + sigma(g) x heads 2t, 2t + 1): the heads' maxima
//            over the g lanes by three shuffles, variant 10's lazy rescale (the O accumulators only when a head's
//            max grows by more than 2^8, warp-uniform), the sums per lane (reduced over g once, at the end).
//     P      per scale block b: P_b = bf16(p * scale[tok][b] * 2^112) packed as C fragments, transposed by
//            movmatrix into GEMM2's B fragments (P^T rows = heads).
//     GEMM2  O^T[512 dims x 8 heads] += V^T P_b, V from the raw bytes as variant 7 builds it (prmt + shift + mask:
//            value * 2^-120 in bf16, exact), 32 m16 tiles = 128 fp32 accumulators per lane.
//   end    the warps' (max, sum, O) merged in shared memory (the ring area), then the common epilogue.
// Precision as variant 7 (K, V exact in the MMAs; Q exact in f16; P_b rounded once to bf16). Only mma.sync,
// ldmatrix, movmatrix, bulk copies and mbarriers (sm_90+ for the copies; sm_80 builds compile it out and the
// launcher runs variant 7 there); the producer form fits SM120's 99 KB per block (one CTA per SM there).
// (16 heads per CTA: sparse_mla_wsf16_kernel.cuh, session 28, a pair of warps per step splitting its dims.)
#pragma once

#include "kernels/attention/sparse_mla_reg_kernel.cuh"
#include "kernels/attention/sparse_mla_wsr_kernel.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

// NW consumer warps. SELF false: a producer warp copies every step into a 7-slot ring shared by the consumers (three
// consumer warps: 222 registers on sm_90, no spill; four were capped at 168 for two CTAs per SM and spilled, 1.03-1.10x
// slower). SELF true (session 27): no producer warp; each consumer warp copies its own steps, two slots of its own
// (four warps: 224 registers, no spill; three were slower everywhere, H200 session 27 call 4).
template <int NW, bool SELF = false>
struct WsfCfg {
  static constexpr int kHC = 8;
  static constexpr int kConsumerWarps = NW;
  static constexpr int kThreads = (SELF ? kConsumerWarps : kConsumerWarps + 1) * 32;
  static constexpr int kBT = 16;
  static constexpr int kRowBytes = 672;  // 656-byte record + 16: 168 words (8 mod 32 banks)
  static constexpr int kSlotBytes = kBT * kRowBytes;
  static constexpr int kRing = SELF ? 2 * NW : 7;
  static constexpr int kQRowBytes = 1088;  // 512 f16 + 64 bytes: 272 words (16 mod 32 banks: LDS.128 conflict-free)
  static constexpr int kOffQ = kRing * kSlotBytes;
  static constexpr int kOffIdx = kOffQ + kHC * kQRowBytes;
  static constexpr int kOffBar = kOffIdx + kMaxSplitEntries * 4;
  static constexpr int kOffMl = kOffBar + 2 * kRing * 8;  // per warp and head: max, sum
  static constexpr int kOffLse = kOffMl + kConsumerWarps * kHC * 2 * 4;
  static constexpr int kSmemBytes = kOffLse + kHC * 4;
  // The merge's per-warp O buffers (fp32, the epilogue's staging layout) reuse the ring.
  static constexpr int kMergeBufFloats = kHC * kStgStride;
  static_assert(kConsumerWarps * kMergeBufFloats * 4 <= kOffQ, "merge buffers must fit in the ring");
  // SM120 allows at most 99 KB of shared memory per block: the launcher runs a form above it only where the device
  // grants it (two CTAs per SM on H100 / H200: 113 KB each).
  static constexpr bool kFitsSm120 = kSmemBytes <= 99 * 1024;
  static_assert(kSmemBytes <= 113 * 1024, "two CTAs per SM on sm_90");
  static_assert(kOffQ % 16 == 0 && kOffIdx % 16 == 0 && kOffBar % 8 == 0, "alignment");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
  static constexpr int kMinBlocks = 1;
#else
  static constexpr int kMinBlocks = 2;
#endif
};

// movmatrix (sm_75+): the 8x8 b16 matrix held as MMA C-fragment rows (lane 4 r + c: row r, columns 2c, 2c + 1),
// transposed in the same layout.
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}

// Token of GEMM1 A-fragment row i of a step (i < 8; row i + 8 is token 8 + wsf_token(i)): rows 2k, 2k + 1 -> tokens
// k, k + 4, so that the transposed P of rows 2t, 2t + 1 is GEMM2's k pair (t, t + 4) (variant 7's V order).
__device__ __forceinline__ int wsf_token(int i) { return (i >> 1) + ((i & 1) << 2); }

inline constexpr float kTwoPow112 = 5.192296858534828e33f;  // 2^112, exact

// Q's latent part of the CTA's HC heads as f16 rows of ROW bytes at smem + OFF (GEMM1's B operand, stored once per
// CTA).
template <int HC, int NTHREADS, int OFF, int ROW>
__device__ __forceinline__ void stage_q_latent_f16(uint8_t* smem, const __nv_bfloat16* q_g, int tid) {
  for (int c = tid; c < HC * 64; c += NTHREADS) {  // HC heads x 64 chunks of 8 values
    const int h = c >> 6, d = (c & 63) * 8;
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(q_g + h * kMlaQkDim + d));
    const uint4 f = make_uint4(bf16x2_to_f16x2(v.x), bf16x2_to_f16x2(v.y), bf16x2_to_f16x2(v.z), bf16x2_to_f16x2(v.w));
    *reinterpret_cast<uint4*>(smem + OFF + h * ROW + d * 2) = f;
  }
}

// The end merge's NBUF per-warp (or per-pair) O buffers of BUF floats each, already weighted, summed into the first
// (the epilogue's staging layout: HC heads of kStgStride floats).
template <int HC, int NTHREADS, int NBUF, int BUF>
__device__ __forceinline__ void sum_merge_buffers(float* stg, int tid) {
  for (int c = tid; c < HC * 128; c += NTHREADS) {
    const int h = c >> 7, d = (c & 127) * 4;
    float4 s = *reinterpret_cast<const float4*>(stg + h * kStgStride + d);
#pragma unroll
    for (int w = 1; w < NBUF; ++w) {
      const float4 v = *reinterpret_cast<const float4*>(stg + w * BUF + h * kStgStride + d);
      s.x += v.x;
      s.y += v.y;
      s.z += v.z;
      s.w += v.w;
    }
    *reinterpret_cast<float4*>(stg + h * kStgStride + d) = s;
  }
}

// One producer lane's share of a step (variant 5's ws_copy_row for 656-byte records in 672-byte rows).
__device__ __forceinline__ void wsf_copy_row(uint8_t* row, int idx, bool act, const uint8_t* base, uint32_t bar,
                                             int lane) {
  using namespace mma;
  const bool valid = idx >= 0;
  const uint32_t nvalid = __popc(__ballot_sync(0xffffffffu, act && valid));
  fence_proxy_async_smem();  // this lane's earlier zero-fill stores before the async-proxy writes
  if (lane == 0) mbar_expect_tx(bar, nvalid * kMlaFp8RecordBytes);
  __syncwarp();
  if (act) {
    if (valid) {
      bulk_copy_g2s(smem_addr(row), base + static_cast<int64_t>(idx) * kMlaFp8RecordBytes, kMlaFp8RecordBytes, bar);
    } else {
      const uint4 z = make_uint4(0u, 0u, 0u, 0u);
      for (int c = 0; c < kMlaFp8RecordBytes / 16; ++c) *reinterpret_cast<uint4*>(row + c * 16) = z;
    }
  }
  mbar_arrive(bar);
}

template <int NW, bool SELF>
__global__ void __launch_bounds__(WsfCfg<NW, SELF>::kThreads, WsfCfg<NW, SELF>::kMinBlocks)
    sparse_mla_wsf_kernel(const KernelArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using C = WsfCfg<NW, SELF>;
  using namespace mma;
  constexpr int NST = C::kRing;
  constexpr int kLR = C::kRowBytes;
  constexpr float kNegInf = -__builtin_huge_valf();
  extern __shared__ __align__(16) uint8_t smem[];

  wait_for_predecessor();  // before any global access (PDL)
  const CtaPlace place = cta_place<8>(a);
  const int hg = place.hg, split = place.split, t = place.t;
  const RowCache rc = row_cache(a, t);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  allow_dependent_launch();  // the combine kernel (PDL)

  const SplitSpan span = split_span<C::kBT>(a, t, split);
  const int nsteps = span.nsteps;
  const int32_t* row_idx = a.indices + static_cast<int64_t>(t) * a.topk;
  const __nv_bfloat16* q_g = a.q + (static_cast<int64_t>(t) * a.num_heads + hg * 8) * kMlaQkDim;

  // Prologue: the split's indices (cleaned), Q's latent part as f16 rows, the ring's mbarriers.
  int* s_idx = reinterpret_cast<int*>(smem + C::kOffIdx);
  stage_split_indices<C::kThreads>(s_idx, row_idx, span, nsteps * C::kBT, rc.num_slots, tid);
  stage_q_latent_f16<8, C::kThreads, C::kOffQ, C::kQRowBytes>(smem, q_g, tid);
  const uint32_t bar_full = smem_addr(smem + C::kOffBar);
  const uint32_t bar_empty = bar_full + NST * 8;
  if (tid == 0)
    for (int s = 0; s < NST; ++s) {
      mbar_init(bar_full + s * 8, 32);   // every producer lane, once per fill
      mbar_init(bar_empty + s * 8, 32);  // every lane of the warp that read the slot
    }
  __syncthreads();

  float* ml_s = reinterpret_cast<float*>(smem + C::kOffMl);
  float* lse_s = reinterpret_cast<float*>(smem + C::kOffLse);
  // SELF: warp w's k-th step (w + k NW) into its slot 2 w + (k & 1), every lane arriving on the slot's "full"
  // barrier (the zero-filled rows' stores then reach the warp's own reads through the barrier as well).
  auto self_issue = [&](int k) {
    const int step = warp + k * C::kConsumerWarps;
    if (step < nsteps) {
      const int slot = 2 * warp + (k & 1);
      const bool act = lane < C::kBT;
      wsf_copy_row(smem + slot * C::kSlotBytes + (act ? lane : 0) * kLR, act ? s_idx[step * C::kBT + lane] : -1, act,
                   rc.base, bar_full + slot * 8, lane);
    }
  };
  if (!SELF && warp == C::kConsumerWarps) {
    // Producer: lanes 0-15 copy the step's 16 records, in step order, each slot once its last reader released it.
    const bool act = lane < C::kBT;
    for (int step = 0; step < nsteps; ++step) {
      const int slot = step % NST, use = step / NST;
      if (use > 0) mbar_wait_parity(bar_empty + slot * 8, (use - 1) & 1);
      wsf_copy_row(smem + slot * C::kSlotBytes + (act ? lane : 0) * kLR, act ? s_idx[step * C::kBT + lane] : -1, act,
                   rc.base, bar_full + slot * 8, lane);
    }
  } else {
    // Q's rope fragments (bf16, GEMM1's B over the 4 rope k-steps: head g, dims 512 + 16 ks + 2t (+ 8)).
    uint32_t qr[4][2];
    {
      const uint32_t* qrow = reinterpret_cast<const uint32_t*>(q_g + g * kMlaQkDim + kMlaLatentDim);
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        qr[ks][0] = __ldg(qrow + 8 * ks + tq);
        qr[ks][1] = __ldg(qrow + 8 * ks + tq + 4);
      }
    }
    const uint8_t* q_s = smem + C::kOffQ + g * C::kQRowBytes + 16 * tq;  // head g, this lane's 8 values per chunk
    const int tok_a = wsf_token(g), tok_b = 8 + tok_a;
    // ldmatrix rows of the rope A fragments: lane l -> A row (l & 7) + 8 ((l >> 3) & 1), k half (l >> 4).
    const int lrow = (lane & 7), ltok = ((lane >> 3) & 1) * 8 + wsf_token(lrow);
    const uint32_t rope_off = ltok * kLR + kMlaFp8ScaleOffset + 16 + (lane >> 4) * 16;

    float acc[32][4];  // O^T tile mt: rows = dims 32 (mt / 2) + 4 g + 2 (mt % 2) + {0 (c0, c1), 1 (c2, c3)}, heads 2t, 2t + 1
#pragma unroll
    for (int mt = 0; mt < 32; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.f;
    float m0 = kNegInf, m1 = kNegInf;  // running maxima (base 2) of heads 2t, 2t + 1 (the same on the g lanes)
    float l0 = 0.f, l1 = 0.f;          // this lane's share of their sums

    if constexpr (SELF) {
      self_issue(0);
      self_issue(1);
    }
    int k = 0;  // this warp's steps so far
    for (int step = warp; step < nsteps; step += C::kConsumerWarps, ++k) {
      const int slot = SELF ? 2 * warp + (k & 1) : step % NST;
      mbar_wait_parity(bar_full + slot * 8, (SELF ? k >> 1 : step / NST) & 1);
      const uint8_t* lat = smem + slot * C::kSlotBytes;
      const uint8_t* ra = lat + tok_a * kLR + 8 * tq;
      const uint8_t* rb = lat + tok_b * kLR + 8 * tq;

      // GEMM1: one accumulator chain per scale block, the rope's its own.
      float cb[4][4], cr[4];
#pragma unroll
      for (int b = 0; b < 4; ++b) cb[b][0] = cb[b][1] = cb[b][2] = cb[b][3] = 0.f;
      cr[0] = cr[1] = cr[2] = cr[3] = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          const int off = 128 * b + 32 * j;
          const uint2 w = *reinterpret_cast<const uint2*>(ra + off);
          const uint2 u = *reinterpret_cast<const uint2*>(rb + off);
          const uint4 qv = *reinterpret_cast<const uint4*>(q_s + off * 2);
          const uint32_t a0[4] = {e4m3x2_to_f16x2(w.x), e4m3x2_to_f16x2(u.x), e4m3x2_to_f16x2(w.x >> 16),
                                  e4m3x2_to_f16x2(u.x >> 16)};
          mma_f16_16816(cb[b], a0, qv.x, qv.y);
          const uint32_t a1[4] = {e4m3x2_to_f16x2(w.y), e4m3x2_to_f16x2(u.y), e4m3x2_to_f16x2(w.y >> 16),
                                  e4m3x2_to_f16x2(u.y >> 16)};
          mma_f16_16816(cb[b], a1, qv.z, qv.w);
        }
      }
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        uint32_t ar[4];
        ldmatrix_x4(ar, smem_addr(lat) + rope_off + ks * 32);
        mma_bf16_16816(cr, ar, qr[ks][0], qr[ks][1]);
      }
      const float4 sa = *reinterpret_cast<const float4*>(lat + tok_a * kLR + kMlaFp8ScaleOffset);
      const float4 sb = *reinterpret_cast<const float4*>(lat + tok_b * kLR + kMlaFp8ScaleOffset);
      float x[4];
      x[0] = cr[0] + cb[0][0] * sa.x + cb[1][0] * sa.y + cb[2][0] * sa.z + cb[3][0] * sa.w;
      x[1] = cr[1] + cb[0][1] * sa.x + cb[1][1] * sa.y + cb[2][1] * sa.z + cb[3][1] * sa.w;
      x[2] = cr[2] + cb[0][2] * sb.x + cb[1][2] * sb.y + cb[2][2] * sb.z + cb[3][2] * sb.w;
      x[3] = cr[3] + cb[0][3] * sb.x + cb[1][3] * sb.y + cb[2][3] * sb.z + cb[3][3] * sb.w;

      // Softmax: mask, the heads' maxima over the 16 tokens (the two rows, then the g lanes), the lazy frame.
      const bool oka = s_idx[step * C::kBT + tok_a] >= 0, okb = s_idx[step * C::kBT + tok_b] >= 0;
      float mx0, mx1;
      mask_scores_head_max(x, oka, okb, a.scale_log2, mx0, mx1);
      float mu0, mu1, al0, al1;
      lazy_frame(mx0, mx1, m0, m1, mu0, mu1, al0, al1);
      const float p0 = fast_exp2(x[0] - mu0), p1 = fast_exp2(x[1] - mu1);
      const float p2 = fast_exp2(x[2] - mu0), p3 = fast_exp2(x[3] - mu1);
      l0 = l0 * al0 + (p0 + p2);
      l1 = l1 * al1 + (p1 + p3);
      if (__any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) {
#pragma unroll
        for (int mt = 0; mt < 32; ++mt) {
          acc[mt][0] *= al0;
          acc[mt][1] *= al1;
          acc[mt][2] *= al0;
          acc[mt][3] *= al1;
        }
      }

      // P_b for the four scale blocks, transposed into GEMM2's B fragments (b0: tokens t, t + 4; b1: t + 8, t + 12).
      // (2^112, not variant 7's 2^120: the lazy frame lets p reach 2^8, so P_b stays below bf16's 2^128 for scales
      // below 2^8, as variant 7's; O comes out 2^-8 small, restored in the merge.)
      const float w0 = p0 * kTwoPow112, w1 = p1 * kTwoPow112, w2 = p2 * kTwoPow112, w3 = p3 * kTwoPow112;
      const float sca[4] = {sa.x, sa.y, sa.z, sa.w}, scb[4] = {sb.x, sb.y, sb.z, sb.w};
      uint32_t pb[4][2];
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        pb[b][0] = movmatrix_trans(pack_bf16x2(w0 * sca[b], w1 * sca[b]));
        pb[b][1] = movmatrix_trans(pack_bf16x2(w2 * scb[b], w3 * scb[b]));
      }

      // GEMM2: 16 groups of 32 dims (group grp in scale block grp / 4), two m16 tiles each.
      const uint8_t* vb = lat + tq * kLR + 4 * g;
#pragma unroll
      for (int grp = 0; grp < 16; ++grp) {
        uint32_t ax[4], ay[4];
        fp8_v_fragments<kLR>(vb + grp * 32, ax, ay);
        mma_bf16_16816(acc[2 * grp], ax, pb[grp >> 2][0], pb[grp >> 2][1]);
        mma_bf16_16816(acc[2 * grp + 1], ay, pb[grp >> 2][0], pb[grp >> 2][1]);
      }
      if constexpr (SELF) {
        __syncwarp();      // every lane done reading the slot (wsf_copy_row fences before the copies)
        self_issue(k + 2);  // into the same slot
      } else {
        mbar_arrive(bar_empty + slot * 8);  // every lane: done reading the slot
      }
    }

    // The warp's sums over its g lanes; its (max, sum) per head -> shared memory; the CTA's frame.
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
      l0 += __shfl_xor_sync(0xffffffffu, l0, o);
      l1 += __shfl_xor_sync(0xffffffffu, l1, o);
    }
    const int h0 = 2 * tq, h1 = h0 + 1;
    if (g == 0) {
      ml_s[(warp * 8 + h0) * 2] = m0;
      ml_s[(warp * 8 + h0) * 2 + 1] = l0;
      ml_s[(warp * 8 + h1) * 2] = m1;
      ml_s[(warp * 8 + h1) * 2 + 1] = l1;
    }
    named_bar_sync(1, C::kConsumerWarps * 32);  // every warp's (max, sum) written, every warp past its last step
    float f0 = 0.f, f1 = 0.f;  // this warp's weights for heads h0 / h1
    {
      float mm0 = kNegInf, mm1 = kNegInf;
#pragma unroll
      for (int w = 0; w < C::kConsumerWarps; ++w) {
        mm0 = fmaxf(mm0, ml_s[(w * 8 + h0) * 2]);
        mm1 = fmaxf(mm1, ml_s[(w * 8 + h1) * 2]);
      }
      float s0 = 0.f, s1 = 0.f;
#pragma unroll
      for (int w = 0; w < C::kConsumerWarps; ++w) {
        const float mw0 = ml_s[(w * 8 + h0) * 2], mw1 = ml_s[(w * 8 + h1) * 2];
        s0 += mw0 == kNegInf ? 0.f : ml_s[(w * 8 + h0) * 2 + 1] * fast_exp2(mw0 - mm0);
        s1 += mw1 == kNegInf ? 0.f : ml_s[(w * 8 + h1) * 2 + 1] * fast_exp2(mw1 - mm1);
      }
      const float i0 = s0 > 0.f ? 1.f / s0 : 0.f, i1 = s1 > 0.f ? 1.f / s1 : 0.f;
      f0 = m0 == kNegInf ? 0.f : fast_exp2(m0 - mm0) * (i0 * 256.f);  // 256: P_b's 2^112 against V's 2^-120
      f1 = m1 == kNegInf ? 0.f : fast_exp2(m1 - mm1) * (i1 * 256.f);
      if (warp == 0 && g == 0) {
        lse_s[h0] = s0 > 0.f ? mm0 + log2f(s0) : kNegInf;
        lse_s[h1] = s1 > 0.f ? mm1 + log2f(s1) : kNegInf;
      }
    }
    // This warp's O, weighted, into its merge buffer (the ring: every consumer is past its last step, so every
    // copy has landed and been read).
    float* buf = reinterpret_cast<float*>(smem) + warp * C::kMergeBufFloats;
#pragma unroll
    for (int mt = 0; mt < 32; ++mt) {
      const int d = 32 * (mt >> 1) + 4 * g + 2 * (mt & 1);
      *reinterpret_cast<float2*>(buf + h0 * kStgStride + d) = make_float2(acc[mt][0] * f0, acc[mt][2] * f0);
      *reinterpret_cast<float2*>(buf + h1 * kStgStride + d) = make_float2(acc[mt][1] * f1, acc[mt][3] * f1);
    }
  }
  __syncthreads();  // every warp's buffer complete (a producer warp joins here)
  float* stg = reinterpret_cast<float*>(smem);
  sum_merge_buffers<8, C::kThreads, C::kConsumerWarps, C::kMergeBufFloats>(stg, tid);
  __syncthreads();
  write_outputs<8, C::kThreads>(a, stg, lse_s, t, hg, split, tid);
#endif
}

}  // namespace glm5rt::kernels::sparse_mla_detail

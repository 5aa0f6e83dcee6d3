// Sparse MLA kernel variant 7 (round 6): FP8 (656-byte) records converted in registers, no dequantization
// pass. Rounds 2-5 measured that every FP8 kernel is bounded by the pass that turns the raw e4m3 slot into
// a bf16 tile in shared memory (a read, a float round trip, a store and one more block barrier per
// 16-token step); here the raw records stay raw and each warp converts only its own MMA operands, right
// before the MMA:
//
//   ring slot (cp.async, 16-byte chunks, as variant 2): latent rows of 544 bytes (512 e4m3 + the 4 float32
//          scales + 16 bytes of padding: 136 words, 8 banks apart) and rope rows of 144 bytes (64 bf16 + 16:
//          4 banks apart, the ldmatrix rows of variant 2)
//   GEMM1  warp (head slice wh, quarter kq) = the 128 latent values of scale block kq plus 16 rope values:
//          K fragments from plain 8-byte loads (two k16 steps per load; the k order inside a step is
//          permuted to "4 consecutive bytes per lane" and Q's fragments are loaded in the same order),
//          e4m3 -> f16 pairs by cvt.rn.f16x2.e4m3x2 (exact: e4m3 is a subset of f16), Q converted to f16
//          once (bf16 -> f16 is exact inside f16's range; |q| < 65504 is assumed), f16 mma.sync; the
//          quarter's fp32 partial score of token r is multiplied by that token's scale of block kq (one
//          multiply per score, not per value); the rope part is a bf16 MMA on the bf16 rope as before.
//   softmax as variant 2, but P is written four times, once per 128-value scale block b, as
//          P_b[head][tok] = bf16(p * scale[tok][b] * 2^120), in the token order of GEMM2's fragments.
//   GEMM2  O^T[dims x heads] += V^T P^T; a warp's dims lie in one scale block, so the scale is in P_b and
//          V needs no multiply: lane (g, t) loads the 4-byte words (4 dims) of tokens t, t+4, t+8, t+12,
//          builds each (dim, token pair) word by one sign-replicating byte permute (prmt) of a word pair and
//          turns it into a bf16x2 by a shift and a mask: e4m3 s.eeee.mmm -> bf16 s.000_eeee.mmm_0000 = value * 2^-120
//          (exact, subnormals included), the 2^120 being in P_b. bf16, not f16, for this GEMM: p * scale
//          spans far more than f16's exponent range (small scales would make P_b subnormal in f16).
//          The output dims of a warp's m16 tiles are permuted accordingly (the epilogue writes them back).
// Steps (session 9): 8 / 16 heads per CTA run three block barriers per step (slot landed, partial scores, P_b);
// 32 heads run two, with the next step's GEMM1 beside this step's softmax (see the loop).
// Precision against the float32 reference: K and V enter the MMAs exactly (no bf16 rounding of
// value * scale as in variants 1-6); Q is exact in f16; P_b is rounded once to bf16 (variants 1-6 round P
// and V each); the running sum uses the unrounded fp32 p.
// Only mma.sync / ldmatrix / cp.async / prmt (the e4m3 cvt is sm_89+; sm_80 builds use the library's
// conversion): valid on sm_120; <= 99 KB of shared memory (static_assert).
#pragma once

#include "kernels/attention/sparse_mla_common.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

// DENSE: one CTA per SM more than the default form, with a shorter ring, where an SM's shared memory holds them
// (H100 / H200; the launcher's reg_dense): session 5, the 8-head kernel four per SM (a 4-slot ring, <= 128
// registers) instead of three (5 slots); session 25, the 16-head kernel three per SM (5 slots, <= 168 registers)
// instead of two (7 slots). Both only above the T <= 8 range, where the default forms are faster.
template <int HC, bool DENSE = false>
struct RegCfg {
  static_assert(!DENSE || HC <= 16, "the denser form: the 8- and 16-head kernels only");
  static constexpr int kWarps = HC >= 32 ? 8 : 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kBT = 16;                        // tokens per step
  static constexpr int kNTw = HC == 8 ? 1 : 2;          // GEMM1 n8 head tiles per warp
  static constexpr int kWH = HC / (8 * kNTw);           // GEMM1 warps along heads
  static constexpr int kKQ = kWarps / kWH;              // GEMM1 warps along k: one per 128-value scale block
  static_assert(kWH * kKQ == kWarps && kKQ == 4, "GEMM1: one warp per latent quarter and head slice");
  static constexpr int kDimsPerWarp = kMlaLatentDim / kWarps;  // 128 or 64: inside one scale block
  static_assert(128 % kDimsPerWarp == 0, "a GEMM2 warp's dims must share one scale block");
  static constexpr int kGroups2 = kDimsPerWarp / 32;           // 32-dim groups = two m16 tiles each
  static constexpr int kMT2 = kDimsPerWarp / 16;
  static constexpr int kNT2 = HC / 8;
  static constexpr int kTPH = kThreads / HC;  // softmax threads per head
  static constexpr int kTokPT = kBT / kTPH;
  static_assert(kTokPT >= 1 && kTokPT * kTPH == kBT && (kTPH == 8 || kTPH == 16), "softmax thread grid");
  static constexpr int kLatRowBytes = 544;   // 512 e4m3 + 16 scale bytes + 16 pad (136 words: 8 mod 32)
  static constexpr int kRopeRowBytes = 144;  // 128 rope bytes + 16 pad (36 words: 4 mod 32)
  static constexpr int kLatChunks = (kMlaLatentDim + 16) / 16;  // 33 record chunks land in the latent rows
  static constexpr int kOffRope = kBT * kLatRowBytes;             // 8704
  static constexpr int kSlotBytes = kOffRope + kBT * kRopeRowBytes;  // 11008
  // 8 heads: 5 slots (4 steps in flight) so that three 128-thread CTAs (118 registers) share an H200 SM;
  // 16 / 32 heads: 7 (6 in flight; two CTAs per SM; the 32-head epilogue staging needs 6 slots' space anyway).
  // The dense forms: 4 slots (8 heads) and 5 (16 heads; 166 registers on sm_90, no spill).
  static constexpr int kStages = HC == 8 ? (DENSE ? 4 : 5) : HC == 16 && DENSE ? 5 : 7;
  // (The dense forms are never launched on SM120, whose 100 KB per SM holds one CTA: their sm_120 code keeps the
  // default forms' register budgets instead of spilling under the denser ones.)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
  static constexpr int kMinBlocks = HC == 8 ? 3 : 1;
#else
  static constexpr int kMinBlocks = HC == 8 ? (DENSE ? 4 : 3) : HC == 16 && DENSE ? 3 : 1;
#endif
  static constexpr int kStageAreaBytes = kStages * kSlotBytes;
  static_assert(HC * kStgStride * 4 <= kStageAreaBytes, "epilogue staging must fit in the stage area");
  static constexpr int kSpartBytes = kKQ * HC * kBT * 4;  // partial S [kq][head][tok] fp32
  static constexpr int kPBytes = 4 * HC * kBT * 2;        // P_b [block][head][16 tok] bf16
  static constexpr int kOffSpart = kStageAreaBytes;
  static constexpr int kOffP = kOffSpart + kSpartBytes;
  static constexpr int kOffAlpha = kOffP + kPBytes;
  static constexpr int kOffInvL = kOffAlpha + HC * 4;
  static constexpr int kOffLse = kOffInvL + HC * 4;
  static constexpr int kOffIdx = kOffLse + HC * 4;
  static constexpr int kSmemBytes = kOffIdx + kMaxSplitEntries * 4;
  static_assert(kSmemBytes <= 99 * 1024, "SM120 allows at most 99 KB of shared memory per block");
  static_assert(kSlotBytes % 16 == 0 && kOffSpart % 16 == 0 && kOffP % 16 == 0 && kOffIdx % 16 == 0, "alignment");
};

// Two e4m3 (the low 16 bits of x, low byte first) -> f16x2, exactly.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t x) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(x & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}
// Byte I of x (low half) and byte I of y (high half) as two e4m3 -> bf16x2 holding value * 2^-120 exactly: the
// e4m3 exponent and mantissa bits moved under bf16's (bias 127 instead of 7), the sign bit to bit 15. prmt's sign
// replication (selector bit 3) makes each half the byte sign-extended to 16 bits, so one shift by 4 puts bits
// 6:0 (eeee.mmm) at 10:4 and a copy of the sign at 15, and one mask clears the rest: prmt + shift + and per
// word. (Session 9: the earlier form, one prmt per two words and then two shifts and two masks per word, cost
// 4.5 instructions per word: ~150 of variant 7's 539 loop instructions per warp and step went to V.)
template <int I>
__device__ __forceinline__ uint32_t e4m3_pair_to_bf16x2_m120(uint32_t x, uint32_t y) {
  static_assert(I >= 0 && I < 4, "byte index");
  constexpr uint32_t kSel = I | (I + 8) << 4 | (I + 4) << 8 | (I + 12) << 12;
  return (mma::prmt(x, y, kSel) << 4) & 0x87f087f0u;
}
// GEMM2's A fragments of two m16 tiles of V^T (as bf16 value * 2^-120) from a raw FP8 slot (variants 7 and 16): vb =
// token t's row (rows LR bytes apart) at this lane's 4 dims 4g .. 4g + 3 of a 32-dim group. Tile ax: rows g / g + 8 =
// dims 4g / 4g + 1 (bytes 0 / 1 of the words); tile ay: dims 4g + 2 / 4g + 3 (bytes 2 / 3); columns (tokens) t, t + 4
// from rows t / t + 4 and t + 8, t + 12 from rows t + 8 / t + 12.
template <int LR>
__device__ __forceinline__ void fp8_v_fragments(const uint8_t* vb, uint32_t (&ax)[4], uint32_t (&ay)[4]) {
  const uint32_t wA = *reinterpret_cast<const uint32_t*>(vb);
  const uint32_t wB = *reinterpret_cast<const uint32_t*>(vb + 4 * LR);
  const uint32_t wC = *reinterpret_cast<const uint32_t*>(vb + 8 * LR);
  const uint32_t wD = *reinterpret_cast<const uint32_t*>(vb + 12 * LR);
  ax[0] = e4m3_pair_to_bf16x2_m120<0>(wA, wB);
  ax[1] = e4m3_pair_to_bf16x2_m120<1>(wA, wB);
  ax[2] = e4m3_pair_to_bf16x2_m120<0>(wC, wD);
  ax[3] = e4m3_pair_to_bf16x2_m120<1>(wC, wD);
  ay[0] = e4m3_pair_to_bf16x2_m120<2>(wA, wB);
  ay[1] = e4m3_pair_to_bf16x2_m120<3>(wA, wB);
  ay[2] = e4m3_pair_to_bf16x2_m120<2>(wC, wD);
  ay[3] = e4m3_pair_to_bf16x2_m120<3>(wC, wD);
}
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t w) {
  __nv_bfloat162 b;
  *reinterpret_cast<uint32_t*>(&b) = w;
  const float2 f = __bfloat1622float2(b);
  const __half2 h = __floats2half2_rn(f.x, f.y);
  return *reinterpret_cast<const uint32_t*>(&h);
}
// GEMM2 position of token `tok` in a P_b row: lane t's B fragment = positions 4t..4t+3 = tokens t, t+4,
// t+8, t+12 (the k pairs (t, t+4) and (t+8, t+12) of its A fragment).
__device__ __forceinline__ int p_pos(int tok) { return ((tok & 3) << 2) | (tok >> 2); }
inline constexpr float kTwoPow120 = 1.329227995784916e36f;  // 2^120, exact

// Online softmax of one 16-token step (as softmax_step in sparse_mla_common.cuh), writing P_b for the four
// scale blocks from the raw slot's scales.
template <int NH, int TPH>
__device__ __forceinline__ void softmax_step_fp8reg(const float* spart, const int* sidx, float scale_log2, int sh,
                                                    int ssub, const uint8_t* lat, int lat_row,
                                                    __nv_bfloat16* p_s, float* alpha_s, float& m_run,
                                                    float& l_run) {
  constexpr int kTokPT = 16 / TPH;
  float sv[kTokPT], mu, al;
  softmax_scores<NH, 4, TPH>(spart, sidx, scale_log2, sh, ssub, sv, m_run, mu, al);
  float ps = 0.f;
#pragma unroll
  for (int j = 0; j < kTokPT; ++j) {
    const int tok = ssub * kTokPT + j;
    const float pv = exp2f(sv[j] - mu);
    ps += pv;
    // An unused entry's slot row is zero-filled: scale 0 (and pv = 0 anyway).
    const float4 sc = *reinterpret_cast<const float4*>(lat + tok * lat_row + kMlaFp8ScaleOffset);
    const float pw = pv * kTwoPow120;
    __nv_bfloat16* dst = p_s + sh * 16 + p_pos(tok);
    dst[0 * NH * 16] = __float2bfloat16(pw * sc.x);
    dst[1 * NH * 16] = __float2bfloat16(pw * sc.y);
    dst[2 * NH * 16] = __float2bfloat16(pw * sc.z);
    dst[3 * NH * 16] = __float2bfloat16(pw * sc.w);
  }
  l_run = l_run * al + ps;
  if (ssub == 0) alpha_s[sh] = al;
}

template <int HC, bool DENSE>
__global__ void __launch_bounds__(RegCfg<HC, DENSE>::kThreads, RegCfg<HC, DENSE>::kMinBlocks)
    sparse_mla_reg_kernel(const KernelArgs a) {
  using C = RegCfg<HC, DENSE>;
  using namespace mma;
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr int NST = C::kStages;
  constexpr int kLR = C::kLatRowBytes;
  extern __shared__ __align__(16) uint8_t smem[];

  wait_for_predecessor();  // before any global access (PDL)
  const CtaPlace place = cta_place<HC>(a);
  const int hg = place.hg, split = place.split, t = place.t;
  const RowCache rc = row_cache(a, t);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  allow_dependent_launch();  // the combine kernel (PDL), as variant 2

  const SplitSpan span = split_span<C::kBT>(a, t, split);
  const int nsteps = span.nsteps;
  const int32_t* row_idx = a.indices + static_cast<int64_t>(t) * a.topk;

  // GEMM1 role: warp = kq * kWH + wh; Q^T fragments of the warp's heads over latent quarter kq (f16, in the
  // permuted k order: k-step 2j + s, lane t holds dims 128 kq + 32 j + 8 t + 4 s + {0,1 | 2,3}) and over the
  // rope dims 512 + 16 kq .. + 15 (bf16, the ordinary order).
  const int wh = warp % C::kWH, kq = warp / C::kWH;
  const __nv_bfloat16* q_w = a.q + (static_cast<int64_t>(t) * a.num_heads + hg * HC + wh * C::kNTw * 8) * kMlaQkDim;
  uint32_t qf[8][C::kNTw][2];
#pragma unroll
  for (int nt = 0; nt < C::kNTw; ++nt) {
    const __nv_bfloat16* qrow = q_w + (nt * 8 + g) * kMlaQkDim + kq * 128 + 8 * tq;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(qrow + 32 * j));
      qf[2 * j][nt][0] = bf16x2_to_f16x2(v.x);
      qf[2 * j][nt][1] = bf16x2_to_f16x2(v.y);
      qf[2 * j + 1][nt][0] = bf16x2_to_f16x2(v.z);
      qf[2 * j + 1][nt][1] = bf16x2_to_f16x2(v.w);
    }
  }
  uint32_t qr[1][C::kNTw][2];
  load_q_fragments<1, C::kNTw>(qr, q_w, kMlaLatentDim / 16 + kq, lane);

  // The split's indices -> shared memory, cleaned.
  int* s_idx = reinterpret_cast<int*>(smem + C::kOffIdx);
  stage_split_indices<C::kThreads>(s_idx, row_idx, span, nsteps * C::kBT, rc.num_slots, tid);
  __syncthreads();

  // Gather step `step` into ring slot `slot`: record chunks 0..32 (latent + scales) -> the latent row,
  // 33..40 (rope) -> the rope row; unused entries zero-filled.
  auto issue = [&](int step, int slot) {
    const uint32_t dst0 = smem_addr(smem + slot * C::kSlotBytes);
    gather_rows<true, C::kThreads, C::kBT, 0>(s_idx + step * C::kBT, rc.base, tid, [&](int r, int col) {
      return col < C::kLatChunks ? dst0 + r * kLR + col * 16
                                 : dst0 + C::kOffRope + r * C::kRopeRowBytes + (col - C::kLatChunks) * 16;
    });
  };

  float* spart = reinterpret_cast<float*>(smem + C::kOffSpart);
  float* alpha_s = reinterpret_cast<float*>(smem + C::kOffAlpha);
  float* inv_l_s = reinterpret_cast<float*>(smem + C::kOffInvL);
  float* lse_s = reinterpret_cast<float*>(smem + C::kOffLse);
  __nv_bfloat16* p_s = reinterpret_cast<__nv_bfloat16*>(smem + C::kOffP);

  const int sh = tid / C::kTPH, ssub = tid % C::kTPH;
  float m_run = kNegInf;
  float l_run = 0.f;

  float acc[C::kMT2][C::kNT2][4];
  zero_acc(acc);
  const int d0 = warp * C::kDimsPerWarp;
  const int blk = d0 >> 7;  // the scale block of this warp's GEMM2 dims

  // GEMM1 of the step in slot `lat`: S^T[16 tok x kNTw*8 heads] over latent quarter kq (f16, two chains) and rope
  // k-step kq (bf16), each token's partial times its scale of block kq; ps[nt] = this lane's four partial scores.
  auto gemm1 = [&](const uint8_t* lat, float (&ps)[C::kNTw][4]) {
    float sl[2][C::kNTw][4], sr[C::kNTw][4];
#pragma unroll
    for (int nt = 0; nt < C::kNTw; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) sl[0][nt][i] = sl[1][nt][i] = sr[nt][i] = 0.f;
    const uint8_t* r0 = lat + g * kLR + kq * 128 + 8 * tq;
    const uint8_t* r1 = r0 + 8 * kLR;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint2 w = *reinterpret_cast<const uint2*>(r0 + 32 * j);
      const uint2 u = *reinterpret_cast<const uint2*>(r1 + 32 * j);
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const uint32_t ws = s ? w.y : w.x, us = s ? u.y : u.x;
        uint32_t af[4];
        af[0] = e4m3x2_to_f16x2(ws);
        af[1] = e4m3x2_to_f16x2(us);
        af[2] = e4m3x2_to_f16x2(ws >> 16);
        af[3] = e4m3x2_to_f16x2(us >> 16);
#pragma unroll
        for (int nt = 0; nt < C::kNTw; ++nt) mma_f16_16816(sl[s][nt], af, qf[2 * j + s][nt][0], qf[2 * j + s][nt][1]);
      }
    }
    {
      uint32_t ar[4];
      ldmatrix_x4(ar, smem_addr(lat + C::kOffRope) + (lane & 15) * C::kRopeRowBytes + (lane >> 4) * 16 + kq * 32);
#pragma unroll
      for (int nt = 0; nt < C::kNTw; ++nt) mma_bf16_16816(sr[nt], ar, qr[0][nt][0], qr[0][nt][1]);
    }
    const float sc0 = *reinterpret_cast<const float*>(lat + g * kLR + kMlaFp8ScaleOffset + kq * 4);
    const float sc1 = *reinterpret_cast<const float*>(lat + (g + 8) * kLR + kMlaFp8ScaleOffset + kq * 4);
#pragma unroll
    for (int nt = 0; nt < C::kNTw; ++nt) {
      ps[nt][0] = (sl[0][nt][0] + sl[1][nt][0]) * sc0 + sr[nt][0];
      ps[nt][1] = (sl[0][nt][1] + sl[1][nt][1]) * sc0 + sr[nt][1];
      ps[nt][2] = (sl[0][nt][2] + sl[1][nt][2]) * sc1 + sr[nt][2];
      ps[nt][3] = (sl[0][nt][3] + sl[1][nt][3]) * sc1 + sr[nt][3];
    }
  };
  auto store_partials = [&](const float (&ps)[C::kNTw][4]) {
#pragma unroll
    for (int nt = 0; nt < C::kNTw; ++nt) {
      const int h = wh * C::kNTw * 8 + nt * 8 + 2 * tq;
      spart[spart_off<HC>(kq, h, g)] = ps[nt][0];
      spart[spart_off<HC>(kq, h + 1, g)] = ps[nt][1];
      spart[spart_off<HC>(kq, h, g + 8)] = ps[nt][2];
      spart[spart_off<HC>(kq, h + 1, g + 8)] = ps[nt][3];
    }
  };
  // GEMM2 of the step in slot `lat`: O^T[d0 .. d0 + kDimsPerWarp) x HC] = alpha O^T + V'^T P_blk^T.
  auto gemm2 = [&](const uint8_t* lat) {
    pv_rescale(acc, alpha_s, lane);
    uint32_t bfr[C::kNT2][2];
#pragma unroll
    for (int nt = 0; nt < C::kNT2; ++nt) {
      const uint2 v = *reinterpret_cast<const uint2*>(p_s + (blk * HC + nt * 8 + g) * 16 + 4 * tq);
      bfr[nt][0] = v.x;
      bfr[nt][1] = v.y;
    }
    const uint8_t* vb = lat + tq * kLR + d0 + 4 * g;
#pragma unroll
    for (int grp = 0; grp < C::kGroups2; ++grp) {
      uint32_t ax[4], ay[4];
      fp8_v_fragments<kLR>(vb + grp * 32, ax, ay);
#pragma unroll
      for (int nt = 0; nt < C::kNT2; ++nt) {
        mma_bf16_16816(acc[2 * grp][nt], ax, bfr[nt][0], bfr[nt][1]);
        mma_bf16_16816(acc[2 * grp + 1][nt], ay, bfr[nt][0], bfr[nt][1]);
      }
    }
  };
  auto slot_of = [&](int step) { return smem + (step % NST) * C::kSlotBytes; };

  ring_fill<NST>(issue, nsteps);
  // Session 9: 32-head CTAs take two block barriers per step (below), measured 1.07-1.14x at every FP8 shape that
  // runs them (T=8 H=64 / 128 up to prefill 4096 x 64); with 8 / 16 heads it was 0.98-1.03x (0.98x at T=1 / 8,
  // where the ring's one step shorter lead shows), so those keep three (H200, docs/PERFORMANCE.md "Session 9").
  if constexpr (HC < 32) {
    // Three block barriers per step: (A) the step's slot landed, (B) its partial scores, (C) its P_b.
    int slot = 0;
    for (int it = 0; it < nsteps; ++it) {
      ring_next<NST>(issue, it, slot, nsteps);  // step it landed, barrier (A), step it + NST - 1 issued
      const uint8_t* lat = smem + slot * C::kSlotBytes;
      float ps[C::kNTw][4];
      gemm1(lat, ps);
      store_partials(ps);
      __syncthreads();  // (B) partial scores visible
      softmax_step_fp8reg<HC, C::kTPH>(spart, s_idx + it * C::kBT, a.scale_log2, sh, ssub, lat, kLR, p_s, alpha_s,
                                       m_run, l_run);
      __syncthreads();  // (C) P_b and the rescale factors visible
      gemm2(lat);
      slot = slot == NST - 1 ? 0 : slot + 1;
    }
  } else {
    // Two block barriers per step, and step it + 1's GEMM1 issued with step it's softmax in one basic
    // block (the two chains of a warp overlap). Its partials stay in registers across barrier (Y), after which
    // every warp has read step it's partials, so one partial buffer suffices. The ring runs one step shorter:
    // barrier (X) of step it must also publish step it + 1's slot, which NST - 2 steps ago was issued.
    if (nsteps > 0) {
      cp_async_wait_group<NST - 2>();  // step 0 landed
      __syncthreads();
      float ps[C::kNTw][4];
      gemm1(slot_of(0), ps);
      store_partials(ps);
    }
    for (int it = 0; it < nsteps; ++it) {
      cp_async_wait_group<NST - 3>();  // step it + 1 landed (this thread's copies)
      __syncthreads();  // (X) step it's partials and step it + 1's slot visible; everyone is done with step it - 1
      const int nxt = it + NST - 1;
      if (nxt < nsteps) issue(nxt, nxt % NST);  // the slot step it - 1 used
      mma::cp_async_commit();
      const uint8_t* lat = slot_of(it);
      // GEMM1 first in program order: it only loads, so ptxas may move its loads and HMMAs among the softmax's
      // (after the softmax's stores it may not: shared-memory stores and loads keep their order). Past the last
      // step it reads a slot nothing writes any more (harmless, unused): no branch in the block.
      float ps[C::kNTw][4];
      gemm1(slot_of(it + 1), ps);
      softmax_step_fp8reg<HC, C::kTPH>(spart, s_idx + it * C::kBT, a.scale_log2, sh, ssub, lat, kLR, p_s, alpha_s,
                                       m_run, l_run);
      __syncthreads();  // (Y) P_b and the rescale factors visible; every warp has read step it's partials
      store_partials(ps);
      gemm2(lat);
    }
  }
  cp_async_wait_all();

  finish_softmax_sums<C::kTPH>(l_run, m_run, ssub, sh, inv_l_s, lse_s);
  __syncthreads();  // also: every warp is past its last GEMM2, so the stage area can be reused
  float* stg = reinterpret_cast<float*>(smem);
  // Tile mt's rows: dims d0 + 32 (mt / 2) + 4 g + 2 (mt % 2) + {0 (c0, c1), 1 (c2, c3)}.
#pragma unroll
  for (int nt = 0; nt < C::kNT2; ++nt) {
    const int h = nt * 8 + 2 * tq;
    const float s0 = inv_l_s[h], s1 = inv_l_s[h + 1];
#pragma unroll
    for (int mt = 0; mt < C::kMT2; ++mt) {
      const int d = d0 + 32 * (mt >> 1) + 4 * g + 2 * (mt & 1);
      stg[h * kStgStride + d] = acc[mt][nt][0] * s0;
      stg[(h + 1) * kStgStride + d] = acc[mt][nt][1] * s1;
      stg[h * kStgStride + d + 1] = acc[mt][nt][2] * s0;
      stg[(h + 1) * kStgStride + d + 1] = acc[mt][nt][3] * s1;
    }
  }
  __syncthreads();
  write_outputs<HC, C::kThreads>(a, stg, lse_s, t, hg, split, tid);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

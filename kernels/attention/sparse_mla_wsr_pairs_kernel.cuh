// Variant 10's 16-head CTA with its four consumer warps as two independent pairs (session 16; KernelArgs::wsr_pairs,
// GLM5RT_MLA_WSR_PAIRS=1). Why: in variant 10 the four warps of the 16 heads split GEMM1's k four ways, so every
// 16-token step ends in a four-way score exchange that keeps them in lockstep: all four issue their GEMM1 ldmatrix
// loads together, then their GEMM2 loads together, and the shared-memory pipe idles while they exchange and run the
// softmax (H200, session 16 calls 2-5: the consumers wait only ~14% of their loop, yet a step's cost grows with its
// shared-memory bytes and its tokens). Here, as in variant 14's pairs,
//   pair pr = warp >> 1 takes the steps pr, pr + 2, pr + 4, ... of the split, each step whole: warp kh = warp & 1
//          runs GEMM1 over its k half (latent 256 kh .. + 255, rope 512 + 32 kh .. + 31: 18 k steps, Q as A fragments,
//          72 registers) and swaps its C fragments with its partner only (one float4 pair each way on the pair's
//          named barrier: 2 KB per step instead of 16), then both run the same softmax and warp kh GEMM2 for output
//          dims 256 kh .. + 255 (128 accumulators);
//   the two pairs keep their own running max, sums and O and never meet in the loop, so they drift apart and one
//          pair's loads fill the pipe while the other is in its softmax; after the loop pair 1 hands (O, m, l)
//          through shared memory to pair 0, which merges the two partial softmaxes and stores (direct epilogue only).
// Same grid, producer warps, five-slot ring (variant 10's staggered rows) and slot indices as variant 10's 16-head
// CTA; a slot's "empty" barrier counts the two warps of the pair that reads it.
#pragma once

#include "kernels/attention/sparse_mla_wsr_kernel.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

struct WsrPairsCfg : WsrCfg<16> {
  static constexpr int kKSteps = 18;    // GEMM1 k16 steps per warp: 16 latent + 2 rope (its k half)
  static constexpr int kDimTiles = 32;  // GEMM2 n8 tiles per warp: its 256 output dims
  // Exchange: [pair][step parity][warp of the pair][n tile][lane] float4, in WsrCfg<16>'s 8 KB partial area.
  static constexpr int kPairXFloat4s = 2 * 2 * 2 * 32;
  static_assert(2 * kPairXFloat4s * 16 <= kSpartFloats * 4, "the pairs' exchange fits the partial area");
  // The merge, in the ring after the loop: pair 1's O tiles [warp][n tile][lane] float4 (32 KB), then its rows'
  // (m0, m1, l0, l1) [warp][lane] float4.
  static constexpr int kMergeOBytes = 2 * kDimTiles * 32 * 16;
  static_assert(kMergeOBytes + 2 * 32 * 16 <= kStageAreaBytes, "the merge area fits the ring");
};

// (A template, as the other kernels, so that only the translation unit that launches it compiles it.)
template <int HC>
__global__ void __launch_bounds__(WsrPairsCfg::kThreads, 1) sparse_mla_wsr_pairs_kernel(const KernelArgs a) {
  static_assert(HC == 16, "the pairs share one 16-head group");
  using C = WsrPairsCfg;
  using namespace mma;
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr int NST = C::kRing;
  constexpr bool kBulk = kWsBulkCopies;
  extern __shared__ __align__(16) uint8_t smem[];

  if (threadIdx.x == 0) timeline_stamp(a.timeline, 0);
  wait_for_predecessor();  // before any global access (PDL)
  if (threadIdx.x == 0) timeline_stamp(a.timeline, 1);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const WsRole role = ws_role<C, 16>(a, warp);
  const int hg = role.hg, split = role.split, t = role.t;
  const SplitSpan& span = role.span;
  const int nsteps = span.nsteps;
  const bool producer = role.producer;
  const int pr = warp >> 1, kh = warp & 1;  // consumers: pair pr (its warps on different SM sub-partitions), half kh
  allow_dependent_launch();                 // the combine kernel (PDL)

  // Q of the 16 heads over this warp's k half as GEMM1 A fragments: rows g / g + 8, k step j = dims 256 kh + 16 j
  // (j < 16) or 512 + 32 kh + 16 (j - 16).
  auto kdim = [&](int j) { return j < 16 ? 256 * kh + 16 * j : kMlaLatentDim + 32 * kh + 16 * (j - 16); };
  uint32_t qa[C::kKSteps][4];
  if (!producer) {
    const uint32_t* q0 =
        reinterpret_cast<const uint32_t*>(a.q + (static_cast<int64_t>(t) * a.num_heads + hg * 16 + g) * kMlaQkDim);
#pragma unroll
    for (int j = 0; j < C::kKSteps; ++j) load_q_a_fragment(qa[j], q0, kdim(j), tq);
  }

  int* s_idx = reinterpret_cast<int*>(smem + C::kOffIdx);  // each ring slot's cleaned indices (the producer's)
  const uint32_t bar_full = smem_addr(smem + C::kOffBar);
  const uint32_t bar_empty = bar_full + NST * 8;
  const int copy_warps = ws_copy_warps_of<C>(a);
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < NST; ++s) {
      // "full": as ws_init_ring for the 16-head CTA (its producer arrivals, sm_80: + one per row for its index);
      // "empty": the two warps of the pair that reads the slot's step.
      mbar_init(bar_full + s * 8, kBulk ? 32 * copy_warps : C::kProducerThreads + C::kBT);
      mbar_init(bar_empty + s * 8, 2);
    }
  }
  __syncthreads();

  float acc[C::kDimTiles][4];  // O: rows g / g + 8, dims 256 kh + 8 n + 2t (+1), over the pair's steps
#pragma unroll
  for (int n = 0; n < C::kDimTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  float m0 = kNegInf, m1 = kNegInf;  // the pair's running max (base 2) of rows g / g + 8, the same on a row's lanes
  float l0 = 0.f, l1 = 0.f;          // this lane's share of the rows' running sums

  if (producer) {
    wsr_produce_slots<C, kBulk>(smem, s_idx, role.row_idx, span, role.rc, tid - C::kConsumerWarps * 32, lane,
                                copy_warps, bar_full, bar_empty, a.timeline);
  } else {
    // ldmatrix row addresses (variant 10's staggered rows; a record's dim d at byte 2 d of its row). K (B of GEMM1):
    // (tok 0-7, k0), (tok 0-7, k0 + 8), (tok 8-15, k0), (tok 8-15, k0 + 8); V (B of GEMM2, transposed): (tok 0-7, d),
    // (tok 8-15, d), (tok 0-7, d + 8), (tok 8-15, d + 8).
    const uint32_t k_off = C::row_off((lane & 7) + ((lane >> 4) << 3)) + ((lane >> 3) & 1) * 16;
    const uint32_t v_off = C::row_off((lane & 7) + (((lane >> 3) & 1) << 3)) + (256 * kh + (lane >> 4) * 8) * 2;
    float4* xbuf = reinterpret_cast<float4*>(smem + C::kOffSpart) + pr * C::kPairXFloat4s;
    int it = 0;  // the pair's step count (its exchange buffer's parity)
    for (int step = pr; step < nsteps; step += 2, ++it) {
      const int slot = step % NST;
      const uint32_t tile = smem_addr(smem + slot * C::kTileBytes);
      mbar_wait_parity(bar_full + slot * 8, (step / NST) & 1);
      if (kh == 0 && lane == 0 && step < 8) timeline_stamp(a.timeline, 8 + step);
      if (tid == 0 && step == 0) timeline_stamp(a.timeline, 3);
      // GEMM1: chains c = k-step parity, n tile nt.
      float s[2][2][4];
#pragma unroll
      for (int c = 0; c < 2; ++c)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) s[c][nt][0] = s[c][nt][1] = s[c][nt][2] = s[c][nt][3] = 0.f;
#pragma unroll
      for (int j = 0; j < C::kKSteps; ++j) {
        uint32_t b[4];
        ldmatrix_x4(b, tile + k_off + kdim(j) * 2);
        mma_bf16_16816(s[j & 1][0], qa[j], b[0], b[1]);
        mma_bf16_16816(s[j & 1][1], qa[j], b[2], b[3]);
      }
      float4 mine[2];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
        mine[nt] = make_float4(s[0][nt][0] + s[1][nt][0], s[0][nt][1] + s[1][nt][1], s[0][nt][2] + s[1][nt][2],
                               s[0][nt][3] + s[1][nt][3]);
      // Swap with the partner through the buffer of this step's parity (the partner reads it before it reaches the
      // pair barrier of the pair's next step, which this warp must pass before writing the buffer again).
      float4* xb = xbuf + (it & 1) * 128;
      xb[(kh * 2 + 0) * 32 + lane] = mine[0];
      xb[(kh * 2 + 1) * 32 + lane] = mine[1];
      named_bar_sync(1 + pr, 64);
      const float4 o0 = xb[((kh ^ 1) * 2 + 0) * 32 + lane], o1 = xb[((kh ^ 1) * 2 + 1) * 32 + lane];
      if (tid == 0 && step == 0) timeline_stamp(a.timeline, 4);
      // x[nt][i]: row g (i = 0, 1) / g + 8 (i = 2, 3), token 8 nt + 2t + (i & 1); both warps add the halves in the same
      // order (a + b == b + a), so both hold the same scores and make the same softmax decisions.
      float x[2][4] = {{mine[0].x + o0.x, mine[0].y + o0.y, mine[0].z + o0.z, mine[0].w + o0.w},
                       {mine[1].x + o1.x, mine[1].y + o1.y, mine[1].z + o1.z, mine[1].w + o1.w}};
      float mu0, mu1, al0, al1;
      softmax_rows_max(x, s_idx + slot * C::kBT, tq, a.scale_log2, m0, m1, mu0, mu1, al0, al1);
      uint32_t pa[4];  // P as GEMM2's A fragment
      float ps0 = 0.f, ps1 = 0.f;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const float e0 = fast_exp2(x[nt][0] - mu0), e1 = fast_exp2(x[nt][1] - mu0);
        const float e2 = fast_exp2(x[nt][2] - mu1), e3 = fast_exp2(x[nt][3] - mu1);
        ps0 += e0 + e1;
        ps1 += e2 + e3;
        pa[2 * nt] = pack_bf16x2(e0, e1);
        pa[2 * nt + 1] = pack_bf16x2(e2, e3);
      }
      l0 = l0 * al0 + ps0;
      l1 = l1 * al1 + ps1;
      if (__any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) scale_mtile(acc, al0, al1);
#pragma unroll
      for (int n2 = 0; n2 < C::kDimTiles / 2; ++n2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, tile + v_off + n2 * 32);
        mma_bf16_16816(acc[2 * n2], pa, b[0], b[1]);
        mma_bf16_16816(acc[2 * n2 + 1], pa, b[2], b[3]);
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(bar_empty + slot * 8);  // this warp is done reading the slot
    }
    // The rows' sums over their four lanes.
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    // The merge. Once both pairs are past their loops every step's records have landed and been read: the ring is
    // free. Pair 1 leaves (O, m, l) there; pair 0 rescales both to the larger max, adds them and stores.
    float4* mo = reinterpret_cast<float4*>(smem);
    float4* ml = reinterpret_cast<float4*>(smem + C::kMergeOBytes);
    named_bar_sync(3, C::kConsumerWarps * 32);
    if (pr == 1) {
#pragma unroll
      for (int n = 0; n < C::kDimTiles; ++n)
        mo[(kh * C::kDimTiles + n) * 32 + lane] = make_float4(acc[n][0], acc[n][1], acc[n][2], acc[n][3]);
      ml[kh * 32 + lane] = make_float4(m0, m1, l0, l1);
    }
    named_bar_sync(3, C::kConsumerWarps * 32);
    if (pr == 0) {
      const float4 o = ml[kh * 32 + lane];
      const float n0 = fmaxf(m0, o.x), n1 = fmaxf(m1, o.y);
      const float u0 = n0 == kNegInf ? 0.f : n0, u1 = n1 == kNegInf ? 0.f : n1;  // (exp2(-inf - 0) = 0, not NaN)
      const float a0 = fast_exp2(m0 - u0), b0 = fast_exp2(o.x - u0), a1 = fast_exp2(m1 - u1), b1 = fast_exp2(o.y - u1);
#pragma unroll
      for (int n = 0; n < C::kDimTiles; ++n) {
        const float4 v = mo[(kh * C::kDimTiles + n) * 32 + lane];
        acc[n][0] = acc[n][0] * a0 + v.x * b0;
        acc[n][1] = acc[n][1] * a0 + v.y * b0;
        acc[n][2] = acc[n][2] * a1 + v.z * b1;
        acc[n][3] = acc[n][3] * a1 + v.w * b1;
      }
      l0 = l0 * a0 + o.z * b0;
      l1 = l1 * a1 + o.w * b1;
      const float i0 = l0 > 0.f ? 1.f / l0 : 0.f, i1 = l1 > 0.f ? 1.f / l1 : 0.f;
      const int64_t row0 = static_cast<int64_t>(t) * a.num_heads + hg * 16 + g;
      const int64_t row = a.nsplit == 1 ? row0 : static_cast<int64_t>(split) * a.num_tokens * a.num_heads + row0;
      store_rows_direct(a, acc, i0, i1, row, 256 * kh, tq);
      if (kh == 0 && tq == 0) {
        const float ls0 = l0 > 0.f ? n0 + log2f(l0) : kNegInf, ls1 = l1 > 0.f ? n1 + log2f(l1) : kNegInf;
        if (a.nsplit == 1) {
          a.lse[row] = ls0 * kLn2;  // -inf stays -inf
          a.lse[row + 8] = ls1 * kLn2;
        } else {
          a.part_lse[row] = ls0;
          a.part_lse[row + 8] = ls1;
        }
      }
    }
  }
  if (a.timeline != nullptr) {
    __syncthreads();
    if (tid == 0) timeline_stamp(a.timeline, 5), timeline_stamp(a.timeline, 6), timeline_stamp(a.timeline, 7);
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail

// Variant 10 (session 6): variant 5's warp-specialized kernel with the softmax in registers. Same grid,
// producer warps, ring and consumer groups (4 warps x 16 heads each, one or two groups per CTA); what changes
// is the orientation of both GEMMs, so that a step's probabilities never go through shared memory:
//   GEMM1  S[16 heads x 16 tok] = Q[16 x 576] K^T, heads on the MMA M side: Q as A fragments in registers
//          (36 per thread, as variant 5's Q^T B fragments), K through ldmatrix (non-transposed) as B. Warp w
//          of the group sums its k quarter (144 dims) and publishes its C fragments as they are (two float4
//          per lane, conflict-free) in a double-buffered partial area (an mbarrier per buffer, one arrival per
//          warp); every warp of the group then adds the other three quarters at its own fragment positions.
//   softmax in registers: lane (g, t) holds heads g and g + 8 at tokens 2t, 2t + 1, 2t + 8, 2t + 9; the step
//          max needs two shuffles (the four lanes of a row), the running max / sum are per lane, and the
//          C fragment of S is already the A fragment of P for GEMM2 (the FlashAttention-2 layout).
//   GEMM2  O[16 heads x 512] += P[16 x 16 tok] V[16 tok x 512]: P as A from registers, V through
//          ldmatrix.trans as B; warp w owns output dims 128 w .. 128 w + 127 (64 fp32 accumulators, as in
//          variant 5); the rescale factors are the lane's own (rows g, g + 8).
// The consumer loop is software-pipelined: step s + 1's GEMM1 is issued before step s's softmax in one basic
// block (the two latency chains of a warp overlap), and the partials of s + 1 are published before step s's
// GEMM2. The accumulators are rescaled only when a head's max grows by more than 2^8, and the softmax sums come
// from one more HMMA (P times ones). Against variant 5 (H200, docs/PERFORMANCE.md "Session 6"): T=128 H=64
// 1.13x, prefill 4096 x 64 1.11x; what bounds it now is the shared-memory traffic of 16-head groups (each K / V
// fragment feeds 2 MMAs; the pipe ~68% busy at ideal wavefront counts). Measured and removed on the way: the
// plain step order (0.99x of variant 5), a group barrier instead of the mbarriers (0.94x), no producer warps with
// the consumers refilling the ring (0.72x). 16 heads per group only (8 heads would pad M to 16: variant 5 runs
// those). Session 10: the 16-head CTA has its own five-slot ring and producer loop (WsrCfg::kStagger,
// wsr_produce_slots); the 32-head CTA keeps variant 5's.
#pragma once

#include "kernels/attention/sparse_mla_ws_kernel.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

// The lazy rescale's threshold (base-2 units): P values up to 2^8 (within bf16's exponent range, fp32 sums far
// from overflow).
inline constexpr float kLazyRescale = 8.f;

// 2^x by the SFU alone (ex2.approx.ftz: 2^-inf = 0, subnormal results flushed to 0); exp2f adds a range
// fix-up around it (4 instructions instead of 1, ten times per lane and step here).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Rows g and g + 8 of one m16 tile of C fragments (NT n8 tiles) times a0 / a1: the online softmax's rescale of the
// O accumulators (variants 10 and 11).
template <int NT>
__device__ __forceinline__ void scale_mtile(float (&acc)[NT][4], float a0, float a1) {
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    acc[n][0] *= a0;
    acc[n][1] *= a0;
    acc[n][2] *= a1;
    acc[n][3] *= a1;
  }
}

// One GEMM1 A fragment of Q with heads on the MMA M side (variants 10 and 11; variant 14's FP8 form until session 29,
// which loads Q by 16 bytes as its bf16 form does): rows g / g + 8 of the m16 tile whose
// row g is q0 (that head's 576 bf16 values as 32-bit words), k columns d0 + 2t (+1) and d0 + 8 + 2t (+1).
__device__ __forceinline__ void load_q_a_fragment(uint32_t (&f)[4], const uint32_t* q0, int d0, int tq) {
  const uint32_t* q8 = q0 + 8 * kMlaQkDim / 2;
  const int w0 = (d0 + 2 * tq) / 2;
  f[0] = __ldg(q0 + w0);
  f[1] = __ldg(q8 + w0);
  f[2] = __ldg(q0 + w0 + 4);
  f[3] = __ldg(q8 + w0 + 4);
}

// x (a step's scores as C fragments: row g i = 0, 1, row g + 8 i = 2, 3, token 8 nt + 2t + (i & 1)) scaled to base 2,
// unused tokens (ok false) -inf.
__device__ __forceinline__ void scale_mask_scores(float (&x)[2][4], const bool (&ok)[2][2], float scale_log2) {
  constexpr float kNegInf = -__builtin_huge_valf();
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int j = 0; j < 4; ++j) x[nt][j] = ok[nt][j & 1] ? x[nt][j] * scale_log2 : kNegInf;
}

// The max of v over a row's four lanes (a quad: lanes 4 g .. 4 g + 3).
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// The step's used tokens from its cleaned indices (sidx: -1 = unused): ok[nt][j] = token 8 nt + 2t + j.
__device__ __forceinline__ void indices_ok(const int* sidx, int tq, bool (&ok)[2][2]) {
  const int2 va = *reinterpret_cast<const int2*>(sidx + 2 * tq);
  const int2 vb = *reinterpret_cast<const int2*>(sidx + 8 + 2 * tq);
  ok[0][0] = va.x >= 0, ok[0][1] = va.y >= 0, ok[1][0] = vb.x >= 0, ok[1][1] = vb.y >= 0;
}

// The lazy rescale's frame from a step's row maxima mx (over the rows' four lanes): the running maxima m keep their
// value while the new ones exceed them by at most kLazyRescale, else become them; mu: the frame's subtrahends (0 for
// a row with nothing used so far, whose max stays -inf, so that exp2 gives 0, not NaN); al: O's rescale factors.
__device__ __forceinline__ void lazy_frame(float mx0, float mx1, float& m0, float& m1, float& mu0, float& mu1,
                                           float& al0, float& al1) {
  constexpr float kNegInf = -__builtin_huge_valf();
  float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
  if (!(mx0 > m0 + kLazyRescale)) mn0 = m0;
  if (!(mx1 > m1 + kLazyRescale)) mn1 = m1;
  mu0 = mn0 == kNegInf ? 0.f : mn0;
  mu1 = mn1 == kNegInf ? 0.f : mn1;
  al0 = fast_exp2(m0 - mu0);
  al1 = fast_exp2(m1 - mu1);
  m0 = mn0;
  m1 = mn1;
}

// The register softmax's first half for rows g / g + 8 of a 16-token step (variants 10 and 14): x = the scores as C
// fragments of two n8 tiles (tokens 8 nt + 2t, + 1), scaled to base 2 and masked by the step's indices (sidx: -1 =
// unused), the rows' maxima over their four lanes, and the lazy rescale of the running maxima m0 / m1 (keep the older
// max while the new one exceeds it by at most kLazyRescale: the same decision on a row's four lanes, which hold the
// same maxima, so that most steps rescale nothing). Returns the subtrahends mu (0 for a row with nothing valid so far,
// whose max stays -inf, so that exp2 gives 0, not NaN) and the rescale factors al.
// ok[nt][j]: token 8 nt + 2t + j is used (softmax_rows_max: from the step's indices; variant 14's exact form: from the
// step's validity bits or its indices).
__device__ __forceinline__ void softmax_rows_max_ok(float (&x)[2][4], const bool (&ok)[2][2], float scale_log2, float& m0,
                                                    float& m1, float& mu0, float& mu1, float& al0, float& al1) {
  scale_mask_scores(x, ok, scale_log2);
  // (The two rows' shuffle rounds interleaved by hand: quad_max row by row reschedules variant 10's step.)
  float mx0 = fmaxf(fmaxf(x[0][0], x[0][1]), fmaxf(x[1][0], x[1][1]));
  float mx1 = fmaxf(fmaxf(x[0][2], x[0][3]), fmaxf(x[1][2], x[1][3]));
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
  lazy_frame(mx0, mx1, m0, m1, mu0, mu1, al0, al1);
}
__device__ __forceinline__ void softmax_rows_max(float (&x)[2][4], const int* sidx, int tq, float scale_log2, float& m0,
                                                 float& m1, float& mu0, float& mu1, float& al0, float& al1) {
  bool ok[2][2];
  indices_ok(sidx, tq, ok);
  softmax_rows_max_ok(x, ok, scale_log2, m0, m1, mu0, mu1, al0, al1);
}

// Rows g and g + 8 of one m16 tile of O (C fragments of NT n8 tiles: columns 8 n + 2t, + 1) into the fp32 staging
// area, scaled by the rows' 1 / l: r0 = row g's column of the tile's first n tile (variants 10 and 11).
template <int NT>
__device__ __forceinline__ void stage_mtile(float* r0, const float (&acc)[NT][4], float i0, float i1) {
  float* r1 = r0 + 8 * kStgStride;
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    *reinterpret_cast<float2*>(r0 + n * 8) = make_float2(acc[n][0] * i0, acc[n][1] * i0);
    *reinterpret_cast<float2*>(r1 + n * 8) = make_float2(acc[n][2] * i1, acc[n][3] * i1);
  }
}

// GEMM2 of one 16-token step for a warp's m16 tile (variants 10 and 14): O[rows g / g + 8, NT n8 tiles] += P V, P as
// A fragments (pa), V's n-tile pairs by ldmatrix.trans from v_addr + 32 n2; the first PRE pairs already loaded by
// the caller into vpre (variant 14's bf16 form since session 22: before the pair barrier).
// F16: P and V as f16 (variant 14's FP8 form since session 29), else bf16.
template <int PRE, bool F16 = false, int NT, int N>
__device__ __forceinline__ void pv_mtile(float (&acc)[NT][4], const uint32_t (&pa)[4], uint32_t v_addr,
                                         const uint32_t (&vpre)[N][4]) {
  static_assert(PRE <= N && PRE <= NT / 2, "preloaded n-tile pairs");
#pragma unroll
  for (int n2 = 0; n2 < NT / 2; ++n2) {
    uint32_t b[4];
    if (n2 < PRE) {
      b[0] = vpre[n2][0], b[1] = vpre[n2][1], b[2] = vpre[n2][2], b[3] = vpre[n2][3];
    } else {
      mma::ldmatrix_x4_trans(b, v_addr + n2 * 32);
    }
    if constexpr (F16) {
      mma::mma_f16_16816(acc[2 * n2], pa, b[0], b[1]);
      mma::mma_f16_16816(acc[2 * n2 + 1], pa, b[2], b[3]);
    } else {
      mma::mma_bf16_16816(acc[2 * n2], pa, b[0], b[1]);
      mma::mma_bf16_16816(acc[2 * n2 + 1], pa, b[2], b[3]);
    }
  }
}
template <bool F16 = false, int NT>
__device__ __forceinline__ void pv_mtile(float (&acc)[NT][4], const uint32_t (&pa)[4], uint32_t v_addr) {
  const uint32_t none[1][4] = {};
  pv_mtile<0, F16>(acc, pa, v_addr, none);
}

// Session 15 (variant 10), shared with variant 14 since session 17: a warp's rows g / g + 8 of one m16 tile of O (C
// fragments of NT n8 tiles, columns col0 + 8 n + 2t, + 1) stored from registers, scaled by the rows' 1 / l, straight
// to the output (one split: bf16) or the split's partial (bf16 or fp32), without the staging's block barriers. row0 =
// the (t, head) row of this lane's row g. bf16: lanes t and t ^ 1 swap one word per n-tile pair so that each lane
// stores 8 bytes and a row's four lanes one whole 32-byte sector (tiles n, n + 1: t = 0 columns 0-3, 1: 8-11, 2: 4-7,
// 3: 12-15); 4-byte stores (half sectors) measured 1.03-1.05x slower at T = 1-4 (session 15, call 2).
template <int NT>
__device__ __forceinline__ void store_mtile_direct(const KernelArgs& a, const float (&acc)[NT][4], int64_t row0,
                                                   int split, int col0, int tq, float i0, float i1) {
  static_assert(NT % 2 == 0, "n-tile pairs");
  const int64_t row = a.nsplit == 1 ? row0 : static_cast<int64_t>(split) * a.num_tokens * a.num_heads + row0;
  if (a.nsplit == 1 || a.part_bf16) {
    const bool odd = tq & 1;
    __nv_bfloat16* dst = (a.nsplit == 1 ? a.out : reinterpret_cast<__nv_bfloat16*>(a.part_o)) + row * kMlaLatentDim +
                         col0 + (odd ? 8 + 2 * (tq - 1) : 2 * tq);
#pragma unroll
    for (int n = 0; n < NT; n += 2) {
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {
        const float inv = hi ? i1 : i0;
        const uint32_t v0 = mma::pack_bf16x2(acc[n][2 * hi] * inv, acc[n][2 * hi + 1] * inv);
        const uint32_t v1 = mma::pack_bf16x2(acc[n + 1][2 * hi] * inv, acc[n + 1][2 * hi + 1] * inv);
        const uint32_t got = __shfl_xor_sync(0xffffffffu, odd ? v0 : v1, 1);
        *reinterpret_cast<uint2*>(dst + hi * 8 * kMlaLatentDim + 8 * n) = odd ? make_uint2(got, v1) : make_uint2(v0, got);
      }
    }
  } else {
    float* dst = a.part_o + row * kMlaLatentDim + col0 + 2 * tq;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      *reinterpret_cast<float2*>(dst + 8 * n) = make_float2(acc[n][0] * i0, acc[n][1] * i0);
      *reinterpret_cast<float2*>(dst + 8 * kMlaLatentDim + 8 * n) = make_float2(acc[n][2] * i1, acc[n][3] * i1);
    }
  }
}

// The LSEs of rows row0 / row0 + 8 (one lane per row pair) from their running maxima (base 2) and total sums: the
// output's natural-log LSE (one split) or the split's log2 LSE; -inf for a row with nothing valid.
__device__ __forceinline__ void store_lse_pair_direct(const KernelArgs& a, int64_t row0, int split, float m0, float m1,
                                                      float l0, float l1) {
  constexpr float kNegInf = -__builtin_huge_valf();
  const float ls0 = l0 > 0.f ? m0 + log2f(l0) : kNegInf, ls1 = l1 > 0.f ? m1 + log2f(l1) : kNegInf;
  if (a.nsplit == 1) {
    a.lse[row0] = ls0 * kLn2;  // -inf stays -inf
    a.lse[row0 + 8] = ls1 * kLn2;
  } else {
    const int64_t row = static_cast<int64_t>(split) * a.num_tokens * a.num_heads + row0;
    a.part_lse[row] = ls0;
    a.part_lse[row + 8] = ls1;
  }
}

template <int HC>
struct WsrCfg : WsCfg<HC, false> {
  using Base = WsCfg<HC, false>;
  static_assert(HC == 16 || HC == 32, "variant 10 runs 16-head consumer groups");
  // Session 10, the 16-head CTA: five ring slots instead of four (a step's gather in flight four steps ahead; on the
  // H200 1.05x at T=1 H=128, 1.06x at T=128 H=16). To fit SM120's 99 KB: record rows staggered (row_off) instead
  // of padded by 16 bytes each; the producer writes each slot's cleaned indices beside its copies instead of the
  // prologue staging the split's 8 KB; the LSEs in the staging area.
  static constexpr bool kStagger = HC == 16;
  static constexpr int kRing = kStagger ? 5 : Base::kRing;
  static constexpr int kTileBytes = kStagger ? Base::kBT * kMlaBf16RecordBytes + 7 * 16 : Base::kTileBytes;
  // Token r's record: tokens 0-7 (one ldmatrix phase) on the even rows, 8-15 on the odd ones, row p = 2 (r & 7) +
  // (r >> 3) staggered by (p >> 1) * 16 bytes: the 8 rows of a phase fall on 8 different 16-byte bank groups, the
  // offsets grow with p (rows never overlap; call 10 ran r * 1152 + (r & 7) * 16, whose row 7 overlapped row 8), and a
  // slot is 16 x 1152 + 112 bytes.
  __host__ __device__ static constexpr uint32_t row_off(int r) {
    return kStagger ? (2 * (r & 7) + (r >> 3)) * kMlaBf16RecordBytes + (r & 7) * 16 : r * Base::kRowBytes;
  }
  static constexpr int kStageAreaBytes = kRing * kTileBytes;
  static_assert(HC * kStgStride * 4 + HC * 4 <= kStageAreaBytes, "epilogue staging and LSEs must fit in the ring");
  // One CTA per SM (session 9; was two for 16 heads, as variant 5): under two CTAs' register cap (168) the 16-head
  // kernel spilled in its loop (sm_90 20 bytes stored / 56 loaded, sm_120 20 / 44). SM120's 100 KB holds one either
  // way; the planner counts one per SM (ctas_per_sm), and where two would matter, at prefill sizes, variant 5 runs.
  // (Session 15, call 3: compiled for two per SM it no longer spills at 168 registers, but ran 1.02-1.05x slower at
  // the same plans, and two per SM at T=1 H=128 (16 x 32) took 12.4 us against 11.0 for one CTA per SM at 16 x 16.
  // At 178-182 registers a second CTA never shares the SM: ten warps put three on a 16K-register sub-partition.)
  static constexpr int kMinBlocks = 1;
  // (Base::kKSteps = 9: GEMM1 k16 steps per warp, its quarter of 576, as in variant 5.)
  static constexpr int kDimTiles = 16;  // GEMM2 n8 tiles per warp: its 128 output dims
  // Partial scores per group: [2 buffers][4 warps][2 n-tiles][32 lanes][4] floats (C fragments as stored).
  static constexpr int kBufFloats = 4 * 2 * 32 * 4;
  static constexpr int kSpartFloats = 2 * kBufFloats;
  static constexpr int kOffSpart = kStageAreaBytes;
  static constexpr int kEndSpart = kOffSpart + Base::kGroups * kSpartFloats * 4;
  // LSEs: 16 heads: after the epilogue staging (written after the loop's last block barrier); 32: after the partials.
  static constexpr int kOffLse = kStagger ? HC * kStgStride * 4 : kEndSpart;
  // Indices: 16 heads: each slot's step (kRing x 16); 32 heads: the split's (kMaxSplitEntries), staged at the start.
  static constexpr int kOffIdx = kStagger ? kEndSpart : (kOffLse + HC * 4 + 15) / 16 * 16;
  static constexpr int kOffBar = kOffIdx + (kStagger ? kRing * Base::kBT : kMaxSplitEntries) * 4;
  // full[kRing], empty[kRing], then the partial-score exchange: [group][buffer] "published" barriers.
  static constexpr int kOffPartBar = kOffBar + 2 * kRing * 8;
  static constexpr int kSmemBytes = kOffPartBar + Base::kGroups * 2 * 8;
  // (+ 16 bytes of static shared memory: the fused merge's flag)
  static_assert(kSmemBytes + 16 <= 99 * 1024, "SM120 allows at most 99 KB of shared memory per block");
  static_assert(kTileBytes % 16 == 0 && kOffSpart % 16 == 0 && kOffLse % 16 == 0 && kOffIdx % 16 == 0 &&
                    kOffBar % 8 == 0,
                "alignment");
};

// The 16-head CTA's producer warps (session 10): gather steps 0 .. nsteps - 1 of the split into the 5-slot ring of
// staggered rows (WsrCfg<16>::row_off), each step's cleaned indices (as ws_stage_and_init cleans them: -1 past the
// split's count, negative or outside the pool) into slot_idx[slot] before the slot's "full" barrier can complete
// (the consumers' masks), each index loaded four steps before its copy. Bulk copies (sm_90+): as ws_produce;
// sm_80: 16-byte cp.async, a row per 4 threads, and the row's index written by its first thread, which also makes an
// ordinary (release) arrival for it (the "full" barrier counts them: kProducerThreads + kBT).
template <class C, bool kBulk>
__device__ __forceinline__ void wsr_produce_slots(uint8_t* smem, int* slot_idx, const int32_t* row_idx,
                                                  const SplitSpan& span, const RowCache& rc, int ptid, int lane,
                                                  int copy_warps, uint32_t bar_full, uint32_t bar_empty,
                                                  unsigned long long* timeline) {
  using namespace mma;
  constexpr int NST = C::kRing, BT = C::kBT;
  // The indices of the thread's row r for the next kAhead steps in registers: each is loaded kAhead steps before its
  // copy. With one step of lead (step + 1's index loaded during step) a free slot left the producer waiting a global
  // load per step (call 6: 0.64-0.86x of the four-slot ring at the 16-head shapes). The step loop is unrolled by
  // kAhead so that register k always holds step k mod kAhead's index (no moves of a load still in flight).
  // (Loaded raw and cleaned only when used: cleaning at the load would wait for it there.)
  constexpr int kAhead = 4;
  auto load_index = [&](int step, int r, bool act) {
    const int i = step * BT + r;
    return act && i < span.cnt ? __ldg(row_idx + span.first + i) : -1;
  };
  auto clean = [&](int v) { return (v >= 0 && v < rc.num_slots) ? v : -1; };
  // body(step, slot, use, idx) for every step of the split, in order.
  auto for_each_step = [&](int r, bool act, auto&& body) {
    int ahead[kAhead];
#pragma unroll
    for (int k = 0; k < kAhead; ++k) ahead[k] = load_index(k, r, act);
    for (int step0 = 0; step0 < span.nsteps; step0 += kAhead) {
#pragma unroll
      for (int k = 0; k < kAhead; ++k) {
        const int step = step0 + k;
        if (step >= span.nsteps) break;
        const int idx = clean(ahead[k]);
        if (step == 0 && ptid == 0 && timeline != nullptr) {
          asm volatile("" ::"r"(idx));  // the stamp after the index load has completed
          timeline_stamp(timeline, 2);
        }
        ahead[k] = load_index(step + kAhead, r, act);
        body(step, step % NST, step / NST, idx);
      }
    }
  };
  if constexpr (kBulk) {
    if (ptid < 32 * copy_warps) {
      // Producer warp pw copies rows pw * rpw .. pw * rpw + rpw - 1 of each step (its lanes 0 .. rpw - 1).
      const int rpw = BT / copy_warps;
      const bool act = lane < rpw;
      const int r = (ptid >> 5) * rpw + (act ? lane : 0);
      for_each_step(r, act, [&](int step, int slot, int use, int idx) {
        if (use > 0) mbar_wait_parity(bar_empty + slot * 8, (use - 1) & 1);
        if (act) slot_idx[slot * BT + r] = idx;  // released by this lane's arrival in ws_copy_row
        ws_copy_row(smem + slot * C::kTileBytes + C::row_off(r), idx, act, rc.base, bar_full + slot * 8, lane);
      });
      // Session 16's probe: a short split's steps (at most 4, all copied into the empty ring at once) as they land,
      // seen by a producer thread with nothing else to do rather than by a consumer that may still be busy with
      // the step before: timeline slots 12 + s (free when the split has at most 4 steps).
      static_assert(NST >= 4, "the probe waits for phase 0: each of the at most 4 steps has its own slot");
      if (timeline != nullptr && ptid == 0 && span.nsteps <= 4)
        for (int s = 0; s < span.nsteps; ++s) {
          mbar_wait_parity(bar_full + s * 8, 0);
          timeline_stamp(timeline, 12 + s);
        }
    }
  } else {
    constexpr int kTPR = C::kProducerThreads / BT;
    constexpr int kChunks = kMlaBf16RecordBytes / 16;
    static_assert(kTPR * BT == C::kProducerThreads && kChunks % kTPR == 0, "a row per kTPR producer threads");
    const int r = ptid / kTPR, j = ptid % kTPR;
    for_each_step(r, true, [&](int step, int slot, int use, int idx) {
      if (use > 0) mbar_wait_parity(bar_empty + slot * 8, (use - 1) & 1);
      const bool ok = idx >= 0;
      const uint8_t* src = (ok ? rc.base + static_cast<int64_t>(idx) * kMlaBf16RecordBytes : rc.base) + j * 16;
      const uint32_t dst = smem_addr(smem + slot * C::kTileBytes + C::row_off(r)) + j * 16;
#pragma unroll
      for (int k = 0; k < kChunks / kTPR; ++k)
        cp_async_16_hint<128>(dst + k * kTPR * 16, src + k * kTPR * 16, ok ? 16 : 0);
      cp_async_mbar_arrive_noinc(bar_full + slot * 8);
      if (j == 0) {
        slot_idx[slot * BT + r] = idx;
        mbar_arrive(bar_full + slot * 8);
      }
    });
  }
}

// kChains4 (session 15; the launcher's default at 16 heads, KernelArgs::wsr_chains4): GEMM1's k steps alternate
// between two accumulator sets per n tile (four chains of 4-5 dependent HMMAs instead of two of 9), summed at the end:
// a shorter latency chain per step where one warp per scheduler runs it (T <= 8; H200 call 2: 0.975-0.985x).
template <int HC, bool kChains4 = false>
__global__ void __launch_bounds__(WsrCfg<HC>::kThreads, WsrCfg<HC>::kMinBlocks)
    sparse_mla_wsr_kernel(const KernelArgs a) {
  using C = WsrCfg<HC>;
  using namespace mma;
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr int NST = C::kRing;
  constexpr bool kBulk = kWsBulkCopies;
  extern __shared__ __align__(16) uint8_t smem[];

  if (threadIdx.x == 0) timeline_stamp(a.timeline, 0);
  wait_for_predecessor();  // before any global access (PDL)
  if (threadIdx.x == 0) timeline_stamp(a.timeline, 1);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const WsRole role = ws_role<C, HC>(a, warp);
  const int hg = role.hg, split = role.split, t = role.t;
  const RowCache& rc = role.rc;
  const SplitSpan& span = role.span;
  const int nsteps = span.nsteps;
  const bool producer = role.producer;
  const int gi = role.gi, wq = role.wq;
  allow_dependent_launch();  // the combine kernel (PDL)

  // Q of the group's 16 heads as GEMM1 A fragments over this warp's k quarter: rows g / g + 8, columns
  // k0 + 2t (+ 8).
  uint32_t qa[C::kKSteps][4];
  if (!producer) {
    const uint32_t* q0 = reinterpret_cast<const uint32_t*>(
        a.q + (static_cast<int64_t>(t) * a.num_heads + hg * HC + gi * 16 + g) * kMlaQkDim);
#pragma unroll
    for (int ks = 0; ks < C::kKSteps; ++ks) load_q_a_fragment(qa[ks], q0, (wq * C::kKSteps + ks) * 16, tq);
  }

  // 32 heads: the split's indices; 16 heads: each ring slot's step (WsrCfg::kStagger).
  int* s_idx = reinterpret_cast<int*>(smem + C::kOffIdx);
  const uint32_t bar_full = smem_addr(smem + C::kOffBar);
  const uint32_t bar_empty = bar_full + NST * 8;
  const int copy_warps = ws_copy_warps_of<C>(a);
  if constexpr (C::kStagger) {
    ws_init_ring<C, kBulk, C::kBT>(tid, copy_warps, bar_full, bar_empty);  // (no split indices to stage)
  } else {
    ws_stage_and_init<C, kBulk>(s_idx, role.row_idx, span, rc, tid, copy_warps, bar_full, bar_empty);
  }
  const uint32_t bar_part = smem_addr(smem + C::kOffPartBar);
  if (tid == 0)
    for (int i = 0; i < C::kGroups * 2; ++i) mbar_init(bar_part + i * 8, 4);  // one arrival per warp of the group
  __syncthreads();

  float* lse_s = reinterpret_cast<float*>(smem + C::kOffLse);
  float acc[C::kDimTiles][4];  // O rows g / g + 8 (heads), columns 128 wq + 8 n + 2t (+1)
#pragma unroll
  for (int n = 0; n < C::kDimTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  float m0 = kNegInf, m1 = kNegInf;  // running max (base-2 units) of heads g, g + 8 (same on the row's lanes)
  float lsum[4] = {0.f, 0.f, 0.f, 0.f};  // their running sums by HMMA (rows g / g + 8 in [0] / [2], every column)

  if (producer) {
    const int ptid = tid - C::kConsumerWarps * 32;
    if constexpr (C::kStagger)
      wsr_produce_slots<C, kBulk>(smem, s_idx, role.row_idx, span, rc, ptid, lane, copy_warps, bar_full, bar_empty,
                                  a.timeline);
    else
      ws_produce<C, false, kBulk>(smem, s_idx, rc, nsteps, ptid, lane, copy_warps, bar_full, bar_empty);
  } else {
    float* spart = reinterpret_cast<float*>(smem + C::kOffSpart) + gi * C::kSpartFloats;
    // ldmatrix row addresses: K (non-transposed, B of GEMM1): matrices (tok 0-7, k0), (tok 0-7, k0 + 8),
    // (tok 8-15, k0), (tok 8-15, k0 + 8); V (transposed, B of GEMM2): (tok 0-7, d), (tok 8-15, d),
    // (tok 0-7, d + 8), (tok 8-15, d + 8).
    const uint32_t k_off =
        C::row_off((lane & 7) + ((lane >> 4) << 3)) + (wq * C::kKSteps * 16 + ((lane >> 3) & 1) * 8) * 2;
    const uint32_t v_off = C::row_off((lane & 7) + (((lane >> 3) & 1) << 3)) + (wq * 128 + (lane >> 4) * 8) * 2;
    // GEMM1 of `step` (after waiting for its slot): this warp's k quarter of S, n-tile 0 = tokens 0-7, 1 = 8-15.
    auto gemm1 = [&](int step, float (&s)[2][4]) {
      const uint32_t tile = smem_addr(smem + (step % NST) * C::kTileBytes);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
      if constexpr (kChains4) {
        float s2[2][4];
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) s2[nt][0] = s2[nt][1] = s2[nt][2] = s2[nt][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < C::kKSteps; ++ks) {
          uint32_t b[4];
          ldmatrix_x4(b, tile + k_off + ks * 32);
          float(&d)[2][4] = (ks & 1) ? s2 : s;
          mma_bf16_16816(d[0], qa[ks], b[0], b[1]);
          mma_bf16_16816(d[1], qa[ks], b[2], b[3]);
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int j = 0; j < 4; ++j) s[nt][j] += s2[nt][j];
      } else {
#pragma unroll
        for (int ks = 0; ks < C::kKSteps; ++ks) {
          uint32_t b[4];
          ldmatrix_x4(b, tile + k_off + ks * 32);
          mma_bf16_16816(s[0], qa[ks], b[0], b[1]);
          mma_bf16_16816(s[1], qa[ks], b[2], b[3]);
        }
      }
    };
    auto wait_full = [&](int step) {
      mbar_wait_parity(bar_full + (step % NST) * 8, (step / NST) & 1);
      if (tid == 0 && step < 8) timeline_stamp(a.timeline, 8 + step);
    };
    // This warp's quarter of `step`'s scores -> buffer (step & 1), then one arrival on that buffer's mbarrier
    // (use k of buffer b = step 2 k + b has parity k & 1). A warp writes a buffer again two steps later, only
    // after waiting for the other buffer's arrivals, which every warp makes after reading this one.
    const uint32_t part_bar = bar_part + gi * 2 * 8;
    auto publish = [&](int step, const float (&s)[2][4]) {
      float* buf = spart + (step & 1) * C::kBufFloats;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
        *reinterpret_cast<float4*>(buf + ((wq * 2 + nt) * 32 + lane) * 4) = make_float4(s[nt][0], s[nt][1], s[nt][2], s[nt][3]);
      __syncwarp();
      if (lane == 0) mbar_arrive(part_bar + (step & 1) * 8);
    };
    auto wait_published = [&](int step) {
      mbar_wait_parity(part_bar + (step & 1) * 8, (step >> 1) & 1);
    };
    // The four quarters at this lane's fragment positions: this warp's own from its registers (`own`, GEMM1's
    // result for `step`), the other three from shared memory (a quarter less partial-score traffic than reading
    // all four). The order of the sum differs between the group's warps, so their scores may differ in the last
    // bit; each warp's output columns use its own P, maximum and sums, so every warp is self-consistent.
    auto gather_scores = [&](int step, const float (&own)[2][4], float (&x)[2][4]) {
      const float* buf = spart + (step & 1) * C::kBufFloats;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int j = 0; j < 4; ++j) x[nt][j] = own[nt][j];
#pragma unroll
      for (int i = 1; i < 4; ++i) {
        const int w = (wq + i) & 3;
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const float4 v = *reinterpret_cast<const float4*>(buf + ((w * 2 + nt) * 32 + lane) * 4);
          x[nt][0] += v.x, x[nt][1] += v.y, x[nt][2] += v.z, x[nt][3] += v.w;
        }
      }
    };
    // Scale and mask (tokens 2t, 2t + 1 of each n-tile), the online softmax of heads g / g + 8, P as GEMM2's A
    // fragment: (row g, k 8 nt + 2t ..) and (row g + 8, k 8 nt + 2t ..).
    auto softmax = [&](int step, float (&x)[2][4], uint32_t (&pa)[4], float& al0, float& al1) {
      const int* sidx = s_idx + (C::kStagger ? step % NST : step) * C::kBT;  // the slot's indices, or the split's
      float mu0, mu1;
      softmax_rows_max(x, sidx, tq, a.scale_log2, m0, m1, mu0, mu1, al0, al1);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const __nv_bfloat162 p01 = __floats2bfloat162_rn(fast_exp2(x[nt][0] - mu0), fast_exp2(x[nt][1] - mu0));
        const __nv_bfloat162 p23 = __floats2bfloat162_rn(fast_exp2(x[nt][2] - mu1), fast_exp2(x[nt][3] - mu1));
        pa[nt * 2 + 0] = *reinterpret_cast<const uint32_t*>(&p01);
        pa[nt * 2 + 1] = *reinterpret_cast<const uint32_t*>(&p23);
      }
    };
    // Rescale (skipped when no head of the warp moved its max: alpha = 1 exactly), GEMM2, release the slot.
    auto gemm2 = [&](int step, const uint32_t (&pa)[4], float al0, float al1) {
      if (__any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) {
        scale_mtile(acc, al0, al1);
        lsum[0] *= al0;
        lsum[1] *= al0;
        lsum[2] *= al1;
        lsum[3] *= al1;
      }
      {
        // Row sums of P (as rounded to bf16, exactly what multiplies V) on the tensor cores: P times ones,
        // instead of unpacking and adding the rounded values (~16 instructions per step).
        constexpr uint32_t kOnes = 0x3f803f80u;  // bf16x2 (1, 1)
        mma_bf16_16816(lsum, pa, kOnes, kOnes);
      }
      const uint32_t tile = smem_addr(smem + (step % NST) * C::kTileBytes);
      pv_mtile(acc, pa, tile + v_off);
      ws_release_slot(bar_empty + (step % NST) * 8, lane);  // this warp is done reading the slot
    };
    float s[2][4], x[2][4], al0, al1;
    uint32_t pa[4];
    if (nsteps > 0) {
      // Step s's softmax is written after step s + 1's GEMM1, in one basic block, so that the compiler
      // interleaves the softmax's ALU / MUFU / shuffle chain with the HMMA chain of the next step's GEMM1
      // (one warp's two latency chains overlapped instead of run back to back: 1.09x at T=128 H=64).
      wait_full(0);
      if (tid == 0) timeline_stamp(a.timeline, 3);
      gemm1(0, s);
      publish(0, s);
      if (tid == 0) timeline_stamp(a.timeline, 4);
      for (int step = 0; step + 1 < nsteps; ++step) {
        wait_published(step);
        gather_scores(step, s, x);
        wait_full(step + 1);
        gemm1(step + 1, s);
        softmax(step, x, pa, al0, al1);
        publish(step + 1, s);  // before GEMM2: the group's other warps need not wait for this warp's GEMM2
        gemm2(step, pa, al0, al1);
      }
      wait_published(nsteps - 1);
      gather_scores(nsteps - 1, s, x);
      softmax(nsteps - 1, x, pa, al0, al1);
      gemm2(nsteps - 1, pa, al0, al1);
    }
  }
  const float l0 = lsum[0], l1 = lsum[2];  // the row sums (the HMMA summed all 16 tokens of every step)
  if (a.wsr_direct && a.counters == nullptr) {
    // Session 15: each consumer lane stores its own fragments (rows g / g + 8, columns 128 wq + 8 n + 2t, + 1)
    // straight to the output or the split's partial, without the block barriers and the shared-memory staging of the
    // common epilogue (the fused merge keeps that one). H200, call 3: 0.95-0.97x at T = 1-8 wherever variant 10
    // runs, T=1 H=128 11.14 -> 10.61 us (GLM5RT_MLA_WSR_DIRECT=0: the staged epilogue).
    if (!producer) {
      const float i0 = l0 > 0.f ? 1.f / l0 : 0.f, i1 = l1 > 0.f ? 1.f / l1 : 0.f;
      const int64_t row0 = static_cast<int64_t>(t) * a.num_heads + hg * HC + gi * 16 + g;
      store_mtile_direct(a, acc, row0, split, wq * 128, tq, i0, i1);
      if (wq == 0 && tq == 0) store_lse_pair_direct(a, row0, split, m0, m1, l0, l1);
    }
    if (a.timeline != nullptr) {
      __syncthreads();
      if (tid == 0) timeline_stamp(a.timeline, 5), timeline_stamp(a.timeline, 6), timeline_stamp(a.timeline, 7);
    }
    return;
  }
  __syncthreads();  // every consumer is past its last GEMM2 and the producer's copies have landed
  if (tid == 0) timeline_stamp(a.timeline, 5);
  // (After the barrier: the 16-head CTA's LSEs live in the ring, which other warps may still be reading before it.)
  if (!producer && wq == 0 && tq == 0) {
    lse_s[gi * 16 + g] = l0 > 0.f ? m0 + log2f(l0) : kNegInf;
    lse_s[gi * 16 + g + 8] = l1 > 0.f ? m1 + log2f(l1) : kNegInf;
  }
  float* stg = reinterpret_cast<float*>(smem);
  if (!producer) {
    stage_mtile(stg + (gi * 16 + g) * kStgStride + wq * 128 + 2 * tq, acc, l0 > 0.f ? 1.f / l0 : 0.f,
                l1 > 0.f ? 1.f / l1 : 0.f);
  }
  __syncthreads();
  if (tid == 0) timeline_stamp(a.timeline, 6);
  write_outputs<HC, C::kThreads>(a, stg, lse_s, t, hg, split, tid);
  if (a.timeline != nullptr) {
    __syncthreads();
    if (tid == 0) timeline_stamp(a.timeline, 7);
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail

// Variant 11 (session 7): variant 10's grid, bulk-copy ring and producer warps with the CTA's 32 heads in ONE
// consumer group of 8 warps, so that every K / V fragment read from shared memory feeds 32 heads (two MMAs per B
// fragment) instead of 16. Why: variant 10 runs at its ideal shared-memory wavefront count with the pipe ~68% busy
// (~850 wavefronts per 16-token step of a 32-head CTA + 144 for the bulk copies: K 288, V 256, partial scores 256);
// its two 16-head groups each read the whole tile, and each of a group's 4 warps re-reads all four partial-score
// quarters. Here each tile byte is read once and each partial score once (0.62x the wavefronts, measured):
//   GEMM1  warp (wq, kh) = (warp & 3, warp >> 2): S[32 heads x 8 tok (half kh)] over its k quarter (144 dims),
//          heads on the MMA M side (two m16 tiles), Q as A fragments in registers (72 per thread), K through
//          ldmatrix as B. kK8 (T <= 32): warp w sums k eighth w (64 latent dims) for all 16 tokens plus one rope
//          k step, so that Q is held once (36 registers). The C fragments go to one partial-score buffer.
//   softmax  warp w owns heads {2c, 2c + 1, 2c + 8, 2c + 9} of m tile w >> 2 (c = w & 3), all 16 tokens: each
//          lane sums the k parts of 2 scores (one float2 per part), the row max is three shuffles, P goes to
//          shared memory already in GEMM2's A-fragment order (one 32-bit store per lane) with the rescale
//          factors; the owner's lanes keep the running max and partial sums (no redundant softmax: variant 10's
//          four warps of a group each ran the group's whole softmax).
//   GEMM2  warp w owns output dims 64 w .. 64 w + 63 of all 32 heads: P as A fragments (two 16-byte loads),
//          V through ldmatrix.trans as B (one B fragment, two MMAs), 64 fp32 accumulators.
// Per step and warp: wait for the partials of step s -> the softmax of its heads and the GEMM1 of step s + 1 (one
// basic block) -> wait for every owner's P -> publish step s + 1's partials -> rescale + GEMM2 of step s -> release
// the slot. Reading P before publishing lets one partial buffer and one P buffer suffice (an owner writes P of step
// s + 1 only after every warp has published step s + 1, i.e. read P of step s), and overlaps the P wait with the
// tail of GEMM1's HMMA chain (publishing first, with P double-buffered, measured 0.94x). Lazy rescale as variant
// 10 (> 2^8). Two producer warps with their own index loads (four steps ahead: cleaning a load at once stalled the
// producer, 1.2x slower) and a 16-index row per ring slot for the masks (instead of the split's 8 KB of indices).
// 320 threads: ten warps over four sub-partitions cap registers at 168 (the kK8 form needs 151). Measured (H200,
// docs/PERFORMANCE.md "Session 7"): 1.03-1.04x over variant 10 at T=128, 1.01-1.03x at prefill, 1.02-1.04x at T=8;
// still latency-bound (0.5 eligible warps per scheduler). bf16 records, 32 heads per CTA only.
#pragma once

#include "kernels/attention/sparse_mla_wsr_kernel.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

struct WsgCfg : WsCfg<32, false> {
  using Base = WsCfg<32, false>;
  static constexpr int kProducerWarps = 2;
  static constexpr int kProducerThreads = kProducerWarps * 32;
  static constexpr int kConsumerWarps = 8;
  static constexpr int kThreads = kConsumerWarps * 32 + kProducerThreads;  // 320
  // (Base::kMinBlocks = 1, Base::kKSteps = 9: GEMM1 k16 steps per warp, a quarter of 576.)
  static constexpr int kDimTiles = 8;  // GEMM2 n8 tiles per warp: its 64 output dims
  // Partial scores (one buffer: a warp publishes step s + 1's only after every owner has read step s's, see the
  // loop), C fragments as stored: k quarters x token halves [8 warps][2 m tiles][32 lanes][4] floats, or k eighths
  // (kK8) [8 warps][2 m tiles][2 n tiles][32 lanes][4].
  static constexpr int kBufFloats = 8 * 2 * 2 * 32 * 4;
  static constexpr int kOffSpart = Base::kStageAreaBytes;
  // P: [2 m tiles][32 lanes][4] bf16x2 words (GEMM2's A fragments); alpha / 1 / l: [g][m tile][hi] floats.
  static constexpr int kOffP = kOffSpart + kBufFloats * 4;
  static constexpr int kOffAlpha = kOffP + 2 * 32 * 4 * 4;
  static constexpr int kOffInvL = kOffAlpha + 32 * 4;
  static constexpr int kOffLse = kOffInvL + 32 * 4;
  // The cleaned indices of the step each ring slot holds (written by the producer before the slot's copies;
  // the consumers' masks), instead of the whole split's indices (8 KB) that variants 5 / 10 stage.
  static constexpr int kOffSlotIdx = kOffLse + 32 * 4;
  static constexpr int kOffBar = kOffSlotIdx + Base::kRing * kBT * 4;
  // full[kRing], empty[kRing], part (the partial scores published), p (P and the rescale factors written)
  static constexpr int kOffPartBar = kOffBar + 2 * Base::kRing * 8;
  static constexpr int kOffPBar = kOffPartBar + 8;
  static constexpr int kSmemBytes = kOffPBar + 8;
  static_assert(kSmemBytes <= 99 * 1024, "SM120 allows at most 99 KB of shared memory per block");
  static_assert(kOffSpart % 16 == 0 && kOffP % 16 == 0 && kOffAlpha % 16 == 0 && kOffSlotIdx % 16 == 0 &&
                    kOffBar % 8 == 0,
                "alignment");
};

// Variant 11's producer warps: step `step` of the split into ring slot step % kRing, its indices read from global
// memory four steps ahead (cleaned as ws_stage_and_init cleans them: -1 past the split's count, negative or
// outside the pool) and stored to the slot's index row for the consumers' masks. sm_90+: each of the two warps' lanes
// 0..7 copy one record by cp.async.bulk (the bytes registered first, every lane arriving after its own copy or
// zero stores, as ws_produce); sm_80: 16-byte cp.async by all 64 producer threads after a producer barrier.
template <class C, bool kBulk>
__device__ __forceinline__ void wsg_produce(uint8_t* smem, int* slot_idx, const int32_t* row_idx, const SplitSpan& span,
                                            const RowCache& rc, int ptid, int lane, uint32_t bar_full,
                                            uint32_t bar_empty) {
  using namespace mma;
  constexpr int NST = C::kRing;
  constexpr int kRowsPerWarp = C::kBT / C::kProducerWarps;  // 8
  const bool act = lane < kRowsPerWarp;
  const int r = (ptid >> 5) * kRowsPerWarp + (act ? lane : 0);
  // The raw index of this lane's row of `step` (-1 past the split's count); cleaned only when used, four steps
  // later, so that the load's latency never stalls the loop (a first form cleaned it at once, one step ahead:
  // the producer then waited ~one L2 round trip per step and the ring ran dry, 1.2x slower).
  auto load_raw = [&](int step) {
    const int i = step * C::kBT + r;
    return act && step < span.nsteps && i < span.cnt ? __ldg(row_idx + span.first + i) : -1;
  };
  constexpr int kAhead = 4;
  int pre[kAhead];
#pragma unroll
  for (int j = 0; j < kAhead; ++j) pre[j] = load_raw(j);
  for (int step0 = 0; step0 < span.nsteps; step0 += kAhead) {
#pragma unroll
    for (int j = 0; j < kAhead; ++j) {
      const int step = step0 + j;
      if (step >= span.nsteps) break;
      const int raw = pre[j];
      pre[j] = load_raw(step + kAhead);
      const int idx = raw >= 0 && raw < rc.num_slots ? raw : -1;
      const int slot = step % NST, use = step / NST;
      if (use > 0) mbar_wait_parity(bar_empty + slot * 8, (use - 1) & 1);
      if (act) slot_idx[slot * C::kBT + r] = idx;
      const uint32_t bar = bar_full + slot * 8;
      if constexpr (kBulk) {
        ws_copy_row(smem + slot * C::kTileBytes + r * C::kRowBytes, idx, act, rc.base, bar, lane);
      } else {
        named_bar_sync(1, C::kProducerThreads);  // the slot's index row complete
        const uint32_t dst0 = smem_addr(smem + slot * C::kTileBytes);
#pragma unroll 4
        for (int c = ptid; c < C::kBT * kRecordChunks<false>; c += C::kProducerThreads)
          gather_chunk<false, C::kRowBytes, 128>(dst0, slot_idx + slot * C::kBT, 0, rc.base, c);
        cp_async_mbar_arrive_noinc(bar);
        // And a plain arrival, whose release orders this thread's index-row stores before the consumers' mask
        // reads (the cp.async arrival only says that the copies landed): "full" counts 2 per producer thread here.
        mbar_arrive(bar);
      }
    }
  }
  cp_async_wait_all();  // nothing may land in the stage area after the loop (the epilogue reuses it)
}

// (A template, as the other kernels, so that only the translation unit that launches it compiles it.)
// kK8: GEMM1 split over k eighths instead of k quarters x token halves: warp w sums latent dims 64 w .. 64 w + 63
// (4 k steps) for all 16 tokens and one rope k step (w & 3) of m tile w >> 2, so that Q takes 36 registers
// instead of 72 (Q held once, not twice) and GEMM1 runs 4 accumulator chains; each owner then sums 8 partials
// per score instead of 4 (16 KB of partial scores per step instead of 8).
template <int HC, bool kK8>
__global__ void __launch_bounds__(WsgCfg::kThreads, WsgCfg::kMinBlocks) sparse_mla_wsg_kernel(const KernelArgs a) {
  static_assert(HC == 32, "variant 11 runs one group of 32 heads");
  using C = WsgCfg;
  using namespace mma;
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr int NST = C::kRing;
  constexpr bool kBulk = kWsBulkCopies;
  extern __shared__ __align__(16) uint8_t smem[];

  wait_for_predecessor();  // before any global access (PDL)
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const WsRole role = ws_role<C, HC>(a, warp);
  const int hg = role.hg, split = role.split, t = role.t;
  const SplitSpan& span = role.span;
  const int nsteps = span.nsteps;
  const bool producer = role.producer;
  allow_dependent_launch();  // the combine kernel (PDL)
  // GEMM1 place: k quarter wq, token half kh (kK8: k eighth `warp`, rope k step rj of m tile rm). Softmax place:
  // m tile om, rows og / og + 8 of it (og = 2 oc + (lane >> 3 & 1)), token half okh (lane >> 4), tokens
  // 8 okh + 2 otq, + 1 (otq = lane & 3).
  const int wq = warp & 3, kh = (warp >> 2) & 1;
  const int rj = warp & 3, rm = (warp >> 2) & 1;
  const int om = (warp >> 2) & 1, oc = warp & 3;
  const int og = 2 * oc + ((lane >> 3) & 1), ohi = (lane >> 2) & 1, okh = lane >> 4, otq = lane & 3;

  // Q of all 32 heads as GEMM1 A fragments over this warp's k quarter: m tile mt, rows g / g + 8, columns
  // k0 + 2t (+ 8). kK8: the first 4 k steps = latent dims 64 warp .., and qr = the rope k step rj of m tile rm.
  uint32_t qa[2][C::kKSteps][4];  // (kK8 uses k steps 0-3)
  uint32_t qr[4];
  if (!producer) {
    // One A fragment (rows g / g + 8 of m tile mt, dims d0 + 2t (+1), d0 + 8 + 2t (+1)).
    auto load_a = [&](uint32_t (&f)[4], int mt, int d0) {
      load_q_a_fragment(f, reinterpret_cast<const uint32_t*>(
                               a.q + (static_cast<int64_t>(t) * a.num_heads + hg * HC + mt * 16 + g) * kMlaQkDim),
                        d0, tq);
    };
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int ks = 0; ks < (kK8 ? 4 : C::kKSteps); ++ks)
        load_a(qa[mt][ks], mt, ((kK8 ? warp * 4 : wq * C::kKSteps) + ks) * 16);
    if (kK8) load_a(qr, rm, kMlaLatentDim + rj * 16);
  }

  int* slot_idx = reinterpret_cast<int*>(smem + C::kOffSlotIdx);
  const uint32_t bar_full = smem_addr(smem + C::kOffBar);
  const uint32_t bar_empty = bar_full + NST * 8;
  const uint32_t bar_part = smem_addr(smem + C::kOffPartBar);
  const uint32_t bar_p = smem_addr(smem + C::kOffPBar);
  if (tid == 0) {
    for (int i = 0; i < NST; ++i) {
      // Every producer thread arrives once per fill (sm_80: twice, see wsg_produce).
      mbar_init(bar_full + i * 8, kBulk ? C::kProducerThreads : 2 * C::kProducerThreads);
      mbar_init(bar_empty + i * 8, C::kConsumerWarps);   // one arrival per consumer warp
    }
    mbar_init(bar_part, C::kConsumerWarps);
    mbar_init(bar_p, C::kConsumerWarps);
  }
  __syncthreads();

  float* alpha_s = reinterpret_cast<float*>(smem + C::kOffAlpha);
  float* inv_l_s = reinterpret_cast<float*>(smem + C::kOffInvL);
  float* lse_s = reinterpret_cast<float*>(smem + C::kOffLse);
  float acc[2][C::kDimTiles][4];  // O: m tile, dims 64 warp + 8 n + 2t (+1), rows g / g + 8
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int n = 0; n < C::kDimTiles; ++n) acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.f;
  float m_run = kNegInf;  // running max (base-2 units) of the owned head (om, og + 8 ohi); same on its 8 lanes
  float l_run = 0.f;      // this lane's share of its running sum

  if (producer) {
    wsg_produce<C, kBulk>(smem, slot_idx, role.row_idx, span, role.rc, tid - C::kConsumerWarps * 32, lane, bar_full,
                          bar_empty);
  } else {
    float* spart = reinterpret_cast<float*>(smem + C::kOffSpart);
    uint32_t* p_s = reinterpret_cast<uint32_t*>(smem + C::kOffP);
    // ldmatrix row addresses: K (non-transposed, B of GEMM1): tokens 8 kh + (lane & 7), dims k0 + 8 (lane >> 3)
    // (four k8 chunks = the B fragments of two k16 steps; the x2 form of the ninth step uses lanes 0..15);
    // kK8: (tok 0-7, k0), (tok 0-7, k0 + 8), (tok 8-15, k0), (tok 8-15, k0 + 8) = both n tiles of one k step.
    // V (transposed, B of GEMM2): (tok 0-7, d), (tok 8-15, d), (tok 0-7, d + 8), (tok 8-15, d + 8).
    const uint32_t k_row = (8 * kh + (lane & 7)) * C::kRowBytes + wq * C::kKSteps * 16 * 2;
    const uint32_t k_off = k_row + (lane >> 3) * 16;
    const uint32_t k_off2 = k_row + ((lane >> 3) & 1) * 16 + (C::kKSteps - 1) * 32;
    const uint32_t k8_off = ((lane & 7) + ((lane >> 4) << 3)) * C::kRowBytes + ((lane >> 3) & 1) * 16;
    const uint32_t v_off =
        ((lane & 7) + (((lane >> 3) & 1) << 3)) * C::kRowBytes + (warp * 64 + (lane >> 4) * 8) * 2;
    auto tile_of = [&](int step) { return smem_addr(smem + (step % NST) * C::kTileBytes); };
    auto wait_full = [&](int step) { mbar_wait_parity(bar_full + (step % NST) * 8, (step / NST) & 1); };
    // This warp's partial scores of `step`: m tile mt, heads g / g + 8, tokens 8 kh + 2t (+1); kK8: s8[mt][nt],
    // tokens 8 nt + 2t (+1).
    auto gemm1 = [&](int step, float (&s)[2][4]) {
      const uint32_t tile = tile_of(step);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) s[mt][0] = s[mt][1] = s[mt][2] = s[mt][3] = 0.f;
#pragma unroll
      for (int kp = 0; kp < C::kKSteps / 2; ++kp) {
        uint32_t b[4];
        ldmatrix_x4(b, tile + k_off + kp * 64);
        mma_bf16_16816(s[0], qa[0][2 * kp], b[0], b[1]);
        mma_bf16_16816(s[1], qa[1][2 * kp], b[0], b[1]);
        mma_bf16_16816(s[0], qa[0][2 * kp + 1], b[2], b[3]);
        mma_bf16_16816(s[1], qa[1][2 * kp + 1], b[2], b[3]);
      }
      uint32_t b[2];
      ldmatrix_x2(b, tile + k_off2);
      mma_bf16_16816(s[0], qa[0][C::kKSteps - 1], b[0], b[1]);
      mma_bf16_16816(s[1], qa[1][C::kKSteps - 1], b[0], b[1]);
    };
    auto gemm1_k8 = [&](int step, float (&s8)[2][2][4]) {
      const uint32_t tile = tile_of(step) + k8_off;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) s8[mt][nt][0] = s8[mt][nt][1] = s8[mt][nt][2] = s8[mt][nt][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        uint32_t b[4];
        ldmatrix_x4(b, tile + ((warp * 4 + ks) * 16) * 2);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          mma_bf16_16816(s8[mt][0], qa[mt][ks], b[0], b[1]);
          mma_bf16_16816(s8[mt][1], qa[mt][ks], b[2], b[3]);
        }
      }
      uint32_t b[4];
      ldmatrix_x4(b, tile + (kMlaLatentDim + rj * 16) * 2);
      if (rm == 0) {
        mma_bf16_16816(s8[0][0], qr, b[0], b[1]);
        mma_bf16_16816(s8[0][1], qr, b[2], b[3]);
      } else {
        mma_bf16_16816(s8[1][0], qr, b[0], b[1]);
        mma_bf16_16816(s8[1][1], qr, b[2], b[3]);
      }
    };
    // The partial area with its mbarrier (one phase per step).
    auto publish = [&](const float* s) {
      constexpr int kFrags = kK8 ? 4 : 2;
#pragma unroll
      for (int f = 0; f < kFrags; ++f)
        *reinterpret_cast<float4*>(spart + ((warp * kFrags + f) * 32 + lane) * 4) =
            make_float4(s[4 * f], s[4 * f + 1], s[4 * f + 2], s[4 * f + 3]);
      __syncwarp();
      if (lane == 0) mbar_arrive(bar_part);
    };
    auto wait_published = [&](int step) { mbar_wait_parity(bar_part, step & 1); };
    // The owner's softmax of `step`: sum the k parts of its 2 scores, mask, online softmax of the owned head
    // (8 lanes: otq x okh), P (bf16) into GEMM2's A-fragment slot, the rescale factor to alpha_s.
    auto softmax = [&](int step) {
      // Part q's C fragment holding the two scores: kK8: warp q, fragment (m tile om, n tile okh); else warp
      // (okh, q), fragment om.
      const float* own = spart + (og * 4 + otq) * 4 + 2 * ohi;
      float x0 = 0.f, x1 = 0.f;
#pragma unroll
      for (int q = 0; q < (kK8 ? 8 : 4); ++q) {
        const int frag = kK8 ? (q * 2 + om) * 2 + okh : (okh * 4 + q) * 2 + om;
        const float2 v = *reinterpret_cast<const float2*>(own + frag * 32 * 4);
        x0 += v.x;
        x1 += v.y;
      }
      const int2 idx = *reinterpret_cast<const int2*>(slot_idx + (step % NST) * C::kBT + 8 * okh + 2 * otq);
      x0 = idx.x >= 0 ? x0 * a.scale_log2 : kNegInf;
      x1 = idx.y >= 0 ? x1 * a.scale_log2 : kNegInf;
      float mx = fmaxf(x0, x1);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
      // Lazy rescale (variant 10): keep the older max while the new one exceeds it by at most kLazyRescale.
      const float mn = mx > m_run + kLazyRescale ? fmaxf(m_run, mx) : m_run;
      // A head with nothing valid so far keeps max -inf; subtract 0 then so that exp2 gives 0, not NaN.
      const float mu = mn == kNegInf ? 0.f : mn;
      const float al = fast_exp2(m_run - mu);
      m_run = mn;
      const __nv_bfloat162 p = __floats2bfloat162_rn(fast_exp2(x0 - mu), fast_exp2(x1 - mu));
      l_run = l_run * al + (__low2float(p) + __high2float(p));  // the rounded values that multiply V
      p_s[(om * 32 + og * 4 + otq) * 4 + ohi + 2 * okh] = *reinterpret_cast<const uint32_t*>(&p);
      if ((lane & 0x13) == 0) alpha_s[og * 4 + om * 2 + ohi] = al;  // otq == 0, okh == 0
      __syncwarp();
      if (lane == 0) mbar_arrive(bar_p);
    };
    // P of `step` and the rescale factors of rows g / g + 8 of both m tiles, after every owner wrote them.
    auto load_p = [&](int step, uint32_t (&pa)[2][4], float4& al) {
      mbar_wait_parity(bar_p, step & 1);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const uint4 v = *reinterpret_cast<const uint4*>(p_s + (mt * 32 + lane) * 4);
        pa[mt][0] = v.x, pa[mt][1] = v.y, pa[mt][2] = v.z, pa[mt][3] = v.w;
      }
      al = *reinterpret_cast<const float4*>(alpha_s + g * 4);
    };
    // Rescale (skipped when no head moved its max: alpha = 1 exactly), GEMM2, release the slot.
    auto gemm2 = [&](int step, const uint32_t (&pa)[2][4], const float4& al) {
      if (__any_sync(0xffffffffu, al.x != 1.f || al.y != 1.f || al.z != 1.f || al.w != 1.f)) {
        scale_mtile(acc[0], al.x, al.y);
        scale_mtile(acc[1], al.z, al.w);
      }
      const uint32_t tile = tile_of(step);
#pragma unroll
      for (int n2 = 0; n2 < C::kDimTiles / 2; ++n2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, tile + v_off + n2 * 32);
        mma_bf16_16816(acc[0][2 * n2], pa[0], b[0], b[1]);
        mma_bf16_16816(acc[1][2 * n2], pa[1], b[0], b[1]);
        mma_bf16_16816(acc[0][2 * n2 + 1], pa[0], b[2], b[3]);
        mma_bf16_16816(acc[1][2 * n2 + 1], pa[1], b[2], b[3]);
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(bar_empty + (step % NST) * 8);  // this warp is done reading the slot
    };
    float s[2][4], s8[2][2][4];  // (one of them is used)
    auto gemm1_any = [&](int step) {
      if constexpr (kK8) gemm1_k8(step, s8);
      else gemm1(step, s);
    };
    auto publish_any = [&]() {
      if constexpr (kK8) publish(&s8[0][0][0]);
      else publish(&s[0][0]);
    };
    uint32_t pa[2][4];
    float4 al;
    if (nsteps > 0) {
      wait_full(0);
      gemm1_any(0);
      publish_any();
      for (int step = 0; step + 1 < nsteps; ++step) {
        wait_published(step);
        wait_full(step + 1);
        // One basic block: the owner's softmax chain and the next step's GEMM1 chain interleave.
        softmax(step);
        gemm1_any(step + 1);
        // P of `step` is read before this warp publishes step s + 1's partials: once every owner has written P,
        // every owner has read the partial area, so one buffer suffices, and no owner can overwrite P before
        // every warp has published. (Publishing first, with P double-buffered, measured 0.94x: the wait for P
        // then no longer overlaps the tail of GEMM1's HMMA chain.)
        load_p(step, pa, al);
        publish_any();
        gemm2(step, pa, al);
      }
      wait_published(nsteps - 1);
      softmax(nsteps - 1);
      load_p(nsteps - 1, pa, al);
      gemm2(nsteps - 1, pa, al);
    }
    // The owned head's total sum (its 8 lanes), 1 / l and the LSE.
    float l = l_run;
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    l += __shfl_xor_sync(0xffffffffu, l, 16);
    if ((lane & 0x13) == 0) {
      inv_l_s[og * 4 + om * 2 + ohi] = l > 0.f ? 1.f / l : 0.f;
      lse_s[om * 16 + og + 8 * ohi] = l > 0.f ? m_run + log2f(l) : kNegInf;
    }
  }
  __syncthreads();  // every consumer is past its last GEMM2 and the producer's copies have landed
  float* stg = reinterpret_cast<float*>(smem);
  if (!producer) {
    const float4 il = *reinterpret_cast<const float4*>(inv_l_s + g * 4);  // m tile 0 rows g / g + 8, m tile 1
    stage_mtile(stg + g * kStgStride + warp * 64 + 2 * tq, acc[0], il.x, il.y);
    stage_mtile(stg + (16 + g) * kStgStride + warp * 64 + 2 * tq, acc[1], il.z, il.w);
  }
  __syncthreads();
  write_outputs<HC, C::kThreads>(a, stg, lse_s, t, hg, split, tid);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

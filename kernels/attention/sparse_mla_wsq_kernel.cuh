// Variant 15 (session 14, experiment): variant 14's 64-head CTA, ring and pair fills, with the eight warps as two
// groups of four, each group 32 heads, so that every K / V fragment a warp reads from shared memory feeds two m16
// tiles (variant 14: one). Why: variant 14 runs the shared-memory pipe at ~66% by our byte count (74% by Nsight
// Compute) and the tensor pipe at ~42%; per 16-token step its warps read 139 KB by ldmatrix (each of its four pairs
// reads the whole tile), here 70 KB. Per warp (group gi = warp / 4, quarter q = warp % 4):
//   GEMM1  S[32 heads x 16 tok] over k quarter q (latent dims 128 q .. + 127 and rope dims 512 + 16 q .. + 15: 9 k
//          steps), Q as A fragments of two m tiles in registers (72 per thread, as variant 14's 16 heads x 288 dims),
//          one ldmatrix x4 of K per k step feeding four MMAs;
//   scores the warp owns one quarter of the group's scores: m tile q / 2, rows g + 8 (q % 2); it receives the other
//          three warps' partial sums of that quarter (one float4 per lane each) on the group's named barrier, adds its
//          own, runs the online softmax of its row on the row's four lanes (two shuffles per max) and publishes P in
//          GEMM2's A-fragment order and the row's rescale factor; a second barrier, and every warp reads both m tiles'
//          P (two 16-byte loads) and the four rescale factors of its rows;
//   GEMM2  O[32 heads x 128 dims (quarter q)] += P V: one ldmatrix x4.trans of V per 16 dims feeding four MMAs; 128
//          fp32 accumulators per thread.
// Per step and CTA: K 37 KB + V 33 KB by ldmatrix, the scores' exchange 12 KB + P 4 KB, the copies 18 KB: ~104 KB
// against variant 14's ~174 KB, for two group rendezvous per step instead of one pair rendezvous. The partial scores,
// P and the rescale factors are single-buffered: a warp writes step s + 1's partials only after the group's second
// barrier of step s (every owner has read step s's), and an owner writes step s + 1's P only after the first barrier
// of step s + 1 (every warp has read step s's P before its GEMM2 of step s). bf16 records, 64 heads per CTA;
// GLM5RT_MLA_V15=1 runs it where variant 14 would run with bf16 records (sparse_mla.cu).
#pragma once

#include "kernels/attention/sparse_mla_wsp_kernel.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

struct WsqCfg : WspCfg<false> {
  using Base = WspCfg<false>;
  static constexpr int kKSteps = 9;     // GEMM1 k16 steps per warp: 8 latent (its 128 dims) + 1 rope (its 16)
  static constexpr int kDimTiles = 16;  // GEMM2 n8 tiles per warp: its 128 output dims
  // Partial scores: [group][owner][sender slot 0..2][lane] float4 (the owner's quarter of the sender's C fragments).
  static constexpr int kOffPart = Base::kStageAreaBytes;
  static constexpr int kPartBytes = 2 * 4 * 3 * 32 * 16;  // 12288
  // P: [group][m tile][lane] uint4 (GEMM2's A fragments); rescale factors: [group][m tile][row half][8] floats.
  static constexpr int kOffP = kOffPart + kPartBytes;
  static constexpr int kOffAlpha = kOffP + 2 * 2 * 32 * 16;
  static constexpr int kOffInvL = kOffAlpha + 2 * 2 * 2 * 8 * 4;  // [64] 1 / l for the epilogue
  static constexpr int kOffIdx = kOffInvL + kHC * 4;
  static constexpr int kOffLse = kOffIdx + kMaxSplitEntries * 4;
  static constexpr int kOffBar = kOffLse + kHC * 4;  // full[kRing], empty[kRing]
  static constexpr int kSmemBytes = kOffBar + 2 * kRing * 8;
  static_assert(kSmemBytes <= 99 * 1024, "SM120 allows at most 99 KB of shared memory per block");
  static_assert(kOffPart % 16 == 0 && kOffP % 16 == 0 && kOffIdx % 16 == 0 && kOffBar % 8 == 0, "alignment");
};

template <int HC>
__global__ void __launch_bounds__(WsqCfg::kThreads, WsqCfg::kMinBlocks) sparse_mla_wsq_kernel(const KernelArgs a) {
  static_assert(HC == 64, "variant 15 runs 64 heads per CTA");
  using C = WsqCfg;
  using namespace mma;
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr int NST = C::kRing;
  constexpr bool kBulk = kWsBulkCopies;
  extern __shared__ __align__(16) uint8_t smem[];

  wait_for_predecessor();  // before any global access (PDL)
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const WsRole role = ws_role<C, HC>(a, warp);  // gi = warp / 4 (32-head group), wq = warp % 4 (quarter)
  const int hg = role.hg, split = role.split, t = role.t;
  const RowCache& rc = role.rc;
  const SplitSpan& span = role.span;
  const int nsteps = span.nsteps;
  allow_dependent_launch();  // the combine kernel (PDL)
  const int gi = role.gi, q = role.wq;
  const int hb = warp >> 1, kh = warp & 1;  // the fill pairs, as variant 14

  int* s_idx = reinterpret_cast<int*>(smem + C::kOffIdx);
  float* lse_s = reinterpret_cast<float*>(smem + C::kOffLse);
  const uint32_t bar_full = smem_addr(smem + C::kOffBar);
  const uint32_t bar_empty = bar_full + NST * 8;
  if (tid == 0) {
    for (int i = 0; i < NST; ++i) {
      mbar_init(bar_full + i * 8, kBulk ? 2 : 2 * 33);  // one arrival per filling warp (sm_80: + one per lane)
      mbar_init(bar_empty + i * 8, C::kConsumerWarps);  // one arrival per warp
    }
  }
  stage_split_indices<C::kThreads>(s_idx, role.row_idx, span, nsteps * C::kBT, rc.num_slots, tid);

  // Q of the group's 32 heads (m tile m: heads 32 gi + 16 m + g / + 8) over this warp's k quarter.
  auto kdim = [&](int j) { return j < 8 ? 128 * q + 16 * j : kMlaLatentDim + 16 * q; };
  uint32_t qa[2][C::kKSteps][4];
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const uint32_t* q0 = reinterpret_cast<const uint32_t*>(
        a.q + (static_cast<int64_t>(t) * a.num_heads + hg * HC + 32 * gi + 16 * m + g) * kMlaQkDim);
#pragma unroll
    for (int j = 0; j < C::kKSteps; ++j) load_q_a_fragment(qa[m][j], q0, kdim(j), tq);
  }
  __syncthreads();  // barriers initialised, indices staged
  auto fill = [&](int st) {
    wsp_fill_rows<C, kBulk, C::kRowsPerWarp>(smem, s_idx, rc.base, st, hb, C::kRowsPerWarp * kh, lane, bar_full + hb * 8);
  };
  if (hb < nsteps) fill(hb);  // steps 0 .. NST - 1 into the empty ring (pair hb: step hb)

  float acc[2][C::kDimTiles][4];  // O: m tile m, dims 128 q + 8 n + 2t (+1), rows g / g + 8
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < C::kDimTiles; ++n) acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.f;
  // The owned row (m tile q / 2, row g + 8 (q % 2)): its running max (base 2; the same on the row's four lanes) and
  // this lane's share of its running sum (tokens 2t, 2t + 1, 8 + 2t, 9 + 2t of each step).
  float m_run = kNegInf, l_run = 0.f;

  const uint32_t k_off = ((lane & 7) + ((lane >> 4) << 3)) * C::kRowBytes + ((lane >> 3) & 1) * 16;
  const uint32_t v_off = ((lane & 7) + (((lane >> 3) & 1) << 3)) * C::kRowBytes + (128 * q + (lane >> 4) * 8) * 2;
  float4* part = reinterpret_cast<float4*>(smem + C::kOffPart) + gi * (4 * 3 * 32);
  uint4* pbuf = reinterpret_cast<uint4*>(smem + C::kOffP) + gi * (2 * 32);
  uint32_t* pword = reinterpret_cast<uint32_t*>(pbuf);
  float* alpha_s = reinterpret_cast<float*>(smem + C::kOffAlpha) + gi * 32;
  const int bar_id = 1 + gi;
  for (int step = 0; step < nsteps; ++step) {
    const int slot = step % NST;
    const uint32_t tile = smem_addr(smem + slot * C::kTileBytes);
    mbar_wait_parity(bar_full + slot * 8, (step / NST) & 1);
    // GEMM1: s[m][nt] = m tile m x tokens 8 nt .. 8 nt + 7, this warp's k quarter.
    float s[2][2][4];
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) s[m][nt][0] = s[m][nt][1] = s[m][nt][2] = s[m][nt][3] = 0.f;
#pragma unroll
    for (int j = 0; j < C::kKSteps; ++j) {
      uint32_t b[4];
      ldmatrix_x4(b, tile + k_off + (j < 8 ? kdim(j) * 2 : C::kRopeOff + (kdim(j) - kMlaLatentDim) * 2));
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        mma_bf16_16816(s[m][0], qa[m][j], b[0], b[1]);
        mma_bf16_16816(s[m][1], qa[m][j], b[2], b[3]);
      }
    }
    // Owner o's quarter of this lane's fragments: m tile o / 2, row half o % 2, both n tiles.
    float4 own = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int o = 0; o < 4; ++o) {
      const int om = o >> 1, oh = o & 1;
      const float4 v = make_float4(s[om][0][2 * oh], s[om][0][2 * oh + 1], s[om][1][2 * oh], s[om][1][2 * oh + 1]);
      if (o == q)
        own = v;
      else
        part[(o * 3 + ((q + 3 - o) & 3)) * 32 + lane] = v;
    }
    named_bar_sync(bar_id, 128);  // (A) the group's partials of this step published
    float x[4] = {own.x, own.y, own.z, own.w};
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      const float4 v = part[(q * 3 + k) * 32 + lane];
      x[0] += v.x, x[1] += v.y, x[2] += v.z, x[3] += v.w;
    }
    // The owned row's online softmax (as softmax_rows_max for one row: masked, base 2, lazy rescale).
    const int* sidx = s_idx + step * C::kBT;
    const int2 va = *reinterpret_cast<const int2*>(sidx + 2 * tq);
    const int2 vb = *reinterpret_cast<const int2*>(sidx + 8 + 2 * tq);
    x[0] = va.x >= 0 ? x[0] * a.scale_log2 : kNegInf;
    x[1] = va.y >= 0 ? x[1] * a.scale_log2 : kNegInf;
    x[2] = vb.x >= 0 ? x[2] * a.scale_log2 : kNegInf;
    x[3] = vb.y >= 0 ? x[3] * a.scale_log2 : kNegInf;
    float mx = fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    float mn = fmaxf(m_run, mx);
    if (!(mx > m_run + kLazyRescale)) mn = m_run;
    const float mu = mn == kNegInf ? 0.f : mn;
    const float al = fast_exp2(m_run - mu);
    m_run = mn;
    const float e0 = fast_exp2(x[0] - mu), e1 = fast_exp2(x[1] - mu);
    const float e2 = fast_exp2(x[2] - mu), e3 = fast_exp2(x[3] - mu);
    l_run = l_run * al + ((e0 + e1) + (e2 + e3));
    // P in GEMM2's A-fragment order of m tile q / 2: words (g, 2t..), (g + 8, 2t..), (g, 8 + 2t..), (g + 8, 8 + 2t..).
    const int oh = q & 1;
    pword[((q >> 1) * 32 + lane) * 4 + oh] = pack_bf16x2(e0, e1);
    pword[((q >> 1) * 32 + lane) * 4 + 2 + oh] = pack_bf16x2(e2, e3);
    if (tq == 0) alpha_s[q * 8 + g] = al;  // [m tile][row half][g] = [q][g]
    named_bar_sync(bar_id, 128);  // (B) P and the rescale factors of this step published
    uint32_t pa[2][4];
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      const uint4 w = pbuf[m * 32 + lane];
      pa[m][0] = w.x, pa[m][1] = w.y, pa[m][2] = w.z, pa[m][3] = w.w;
    }
    const float a00 = alpha_s[0 * 8 + g], a01 = alpha_s[1 * 8 + g], a10 = alpha_s[2 * 8 + g], a11 = alpha_s[3 * 8 + g];
    if (__any_sync(0xffffffffu, a00 != 1.f || a01 != 1.f || a10 != 1.f || a11 != 1.f)) {
      scale_mtile(acc[0], a00, a01);
      scale_mtile(acc[1], a10, a11);
    }
    // GEMM2
#pragma unroll
    for (int n2 = 0; n2 < C::kDimTiles / 2; ++n2) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, tile + v_off + n2 * 32);
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        mma_bf16_16816(acc[m][2 * n2], pa[m], b[0], b[1]);
        mma_bf16_16816(acc[m][2 * n2 + 1], pa[m], b[2], b[3]);
      }
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(bar_empty + slot * 8);  // this warp is done reading the slot
    // The refill, as variant 14: step + NST - 1 into the slot step - 1 used, by the pair that fills that slot.
    if (step > 0 && step + NST - 1 < nsteps && (step + NST - 1) % NST == hb) {
      mbar_wait_parity(bar_empty + hb * 8, ((step - 1) / NST) & 1);
      fill(step + NST - 1);
    }
  }
  if constexpr (!kBulk) cp_async_wait_all();
  // The owned row's total sum (its four lanes), its LSE and 1 / l for every warp's epilogue.
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);
  float* inv_l_s = reinterpret_cast<float*>(smem + C::kOffInvL);
  if (tq == 0) {
    const int row = 32 * gi + 8 * q + g;  // 16 (q / 2) + 8 (q % 2) + g
    lse_s[row] = l_run > 0.f ? m_run + log2f(l_run) : kNegInf;
    inv_l_s[row] = l_run > 0.f ? 1.f / l_run : 0.f;
  }
  __syncthreads();  // every warp is past its last GEMM2 and every copy has landed: the ring is free; 1 / l visible
  float* stg = reinterpret_cast<float*>(smem);
  const float* il = inv_l_s + 32 * gi + g;
  const float i00 = il[0], i01 = il[8], i10 = il[16], i11 = il[24];
  // Two passes of 32 heads (group 0, then 1) through the staging area.
#pragma unroll 1
  for (int pass = 0; pass < 2; ++pass) {
    if (gi == pass) {
      stage_mtile(stg + g * kStgStride + 128 * q + 2 * tq, acc[0], i00, i01);
      stage_mtile(stg + (16 + g) * kStgStride + 128 * q + 2 * tq, acc[1], i10, i11);
    }
    __syncthreads();
    write_outputs<32, C::kThreads>(a, stg, lse_s + 32 * pass, t, 2 * hg + pass, split, tid);
    __syncthreads();
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail

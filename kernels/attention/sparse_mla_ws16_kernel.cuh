// Variant 12 (session 7): variant 11's single consumer group for the CTA's 32 heads spread over 16 warps (four
// per SM sub-partition instead of two) and no producer warps. Why: variant 11 is latency-bound (Nsight Compute at
// T=128 H=64: 2.5 active and 0.5 eligible warps per scheduler, 36% of the stalls on fixed-latency dependencies, the
// 8-warp rendezvous per step unhidden); more warps per scheduler need fewer registers per warp, and any warp
// beyond 16 (a producer) would cap them at 102.
//   GEMM1  warp w: k eighth kg = w & 7 (latent dims 64 kg .. 64 kg + 63, 4 k steps) for token half kh = w >> 3,
//          both m16 tiles (each K B fragment feeds two MMAs), plus one rope k step (kg & 3) of m tile kg >> 2:
//          Q 36 registers, S[32 heads x 8 tokens] partials to shared memory (one buffer, as variant 11).
//   softmax  warp w owns rows w & 7 and (w & 7) + 8 of m tile w >> 3 (2 heads x 16 tokens, one score per lane:
//          the sum of 8 partials, four shuffles for the row max), P to shared memory in GEMM2's A-fragment order.
//   GEMM2  warp w owns output dims 32 w .. 32 w + 31 of all 32 heads (32 fp32 accumulators; each V B fragment
//          feeds two MMAs).
//   ring   4 slots of 16 records as variants 5 / 10 / 11, filled by the consumers themselves: warp w copies record
//          w of each step (one cp.async.bulk by its lane 0; zero-filled by the warp when unused). The slot of step
//          s - 1 is refilled with step s + 3 in iteration s, right after the P rendezvous of step s, which every
//          warp reaches only after its GEMM2 of step s - 1 (so no "empty" barrier). Optionally each warp asks L2
//          for its record of step s + 3 + l2_ahead (KernelArgs::l2_ahead; the copy then hits L2).
// Loop per warp (variant 11's order): wait for the partials of s -> softmax of its heads + GEMM1 of s + 1 -> wait
// for every owner's P of s -> publish the partials of s + 1 -> refill -> GEMM2 of s. 512 threads, <= 128
// registers. bf16 records, 32 heads per CTA only.
#pragma once

#include "kernels/attention/sparse_mla_wsr_kernel.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

struct Ws16Cfg : WsCfg<32, false> {
  using Base = WsCfg<32, false>;
  static constexpr int kConsumerWarps = 16;
  static constexpr int kProducerWarps = 0;
  static constexpr int kProducerThreads = 0;
  static constexpr int kThreads = kConsumerWarps * 32;  // 512
  static constexpr int kMinBlocks = 1;
  static constexpr int kDimTiles = 4;  // GEMM2 n8 tiles per warp: its 32 output dims
  // Partial scores: [token half][8 warps][2 m tiles][32 lanes][4] floats, the halves 16 floats apart so that an
  // owner's reads of both halves fall in different banks.
  static constexpr int kHalfFloats = 8 * 2 * 32 * 4 + 16;
  static constexpr int kOffSpart = Base::kStageAreaBytes;
  static constexpr int kOffP = kOffSpart + 2 * kHalfFloats * 4;  // [2 m tiles][32 lanes][4] bf16x2 words
  static constexpr int kOffAlpha = kOffP + 2 * 32 * 4 * 4;        // [g][m tile][hi] floats, also 1 / l after
  static constexpr int kOffLse = kOffAlpha + 32 * 4;
  static constexpr int kOffIdx = kOffLse + 32 * 4;
  static constexpr int kOffBar = kOffIdx + kMaxSplitEntries * 4;  // full[kRing], part, p
  static constexpr int kSmemBytes = kOffBar + (Base::kRing + 2) * 8;
  static_assert(kSmemBytes <= 99 * 1024, "SM120 allows at most 99 KB of shared memory per block");
  static_assert(kOffSpart % 16 == 0 && kOffP % 16 == 0 && kOffAlpha % 16 == 0 && kOffIdx % 16 == 0 &&
                    kOffBar % 8 == 0 && kHalfFloats % 4 == 0,
                "alignment");
};

// (A template, as the other kernels, so that only the translation unit that launches it compiles it.)
template <int HC>
__global__ void __launch_bounds__(Ws16Cfg::kThreads, Ws16Cfg::kMinBlocks) sparse_mla_ws16_kernel(const KernelArgs a) {
  static_assert(HC == 32, "variant 12 runs one group of 32 heads");
  using C = Ws16Cfg;
  using namespace mma;
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr int NST = C::kRing;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kBulk = true;  // one cp.async.bulk per bf16 record
#else
  constexpr bool kBulk = false;
#endif
  extern __shared__ __align__(16) uint8_t smem[];

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const CtaPlace place = cta_place<HC>(a);
  const int hg = place.hg, split = place.split, t = place.t;
  const RowCache rc = row_cache(a, t);
  const SplitSpan span = split_span<C::kBT>(a, t, split);
  const int nsteps = span.nsteps;
  allow_dependent_launch();  // the combine kernel (PDL)
  // GEMM1 place: k eighth kg, token half kh, rope k step rj of m tile rm. Softmax place: m tile om, rows og /
  // og + 8 (ohi), tokens 8 okh + 2 otq + oj.
  const int kg = warp & 7, kh = warp >> 3, rj = kg & 3, rm = kg >> 2;
  const int om = warp >> 3, og = warp & 7;
  const int ohi = lane >> 4, okh = (lane >> 3) & 1, otq = (lane >> 1) & 3, oj = lane & 1;

  int* s_idx = reinterpret_cast<int*>(smem + C::kOffIdx);
  const uint32_t bar_full = smem_addr(smem + C::kOffBar);
  const uint32_t bar_part = bar_full + NST * 8;
  const uint32_t bar_p = bar_part + 8;
  stage_split_indices<C::kThreads>(s_idx, a.indices + static_cast<int64_t>(t) * a.topk, span, nsteps * C::kBT,
                                   rc.num_slots, tid);
  if (tid == 0) {
    // bulk: lane 0 of every warp arrives once per fill (after registering its record's bytes); sm_80: every
    // thread's cp.async arrive.
    for (int i = 0; i < NST; ++i) mbar_init(bar_full + i * 8, kBulk ? C::kConsumerWarps : C::kThreads);
    mbar_init(bar_part, C::kConsumerWarps);
    mbar_init(bar_p, C::kConsumerWarps);
  }
  __syncthreads();

  // Record `warp` of `step` into its ring slot (unused entry: zeros, so that V stays finite; P is 0 there).
  auto fill = [&](int step) {
    const uint32_t bar = bar_full + (step % NST) * 8;
    uint8_t* row = smem + (step % NST) * C::kTileBytes + warp * C::kRowBytes;
    const int* sidx = s_idx + step * C::kBT + warp;
    if constexpr (kBulk) {
      const int idx = *sidx;
      if (idx < 0) {
        const uint4 z = make_uint4(0u, 0u, 0u, 0u);
        for (int c = lane; c < kMlaBf16RecordBytes / 16; c += 32) *reinterpret_cast<uint4*>(row + c * 16) = z;
      }
      fence_proxy_async_smem();  // this lane's earlier zero stores of the row before the async-proxy write
      __syncwarp();
      if (lane == 0) {
        if (idx >= 0) {
          mbar_expect_tx(bar, kMlaBf16RecordBytes);
          bulk_copy_g2s(smem_addr(row), rc.base + static_cast<int64_t>(idx) * kMlaBf16RecordBytes,
                        kMlaBf16RecordBytes, bar);
        }
        mbar_arrive(bar);
      }
    } else {
      for (int c = lane; c < kRecordChunks<false>; c += 32)
        gather_chunk<false, C::kRowBytes, 128>(smem_addr(row), sidx, 0, rc.base, c);
      cp_async_mbar_arrive_noinc(bar);
    }
  };
  auto l2_prefetch = [&](int step) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (lane == 0 && step < nsteps) {
      const int idx = s_idx[step * C::kBT + warp];
      if (idx >= 0)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(
                         rc.base + static_cast<int64_t>(idx) * kMlaBf16RecordBytes),
                     "r"(kMlaBf16RecordBytes)
                     : "memory");
    }
#endif
  };
  for (int s = 0; s < NST && s < nsteps; ++s) fill(s);
  if (a.l2_ahead > 0)
    for (int s = NST; s < NST + a.l2_ahead; ++s) l2_prefetch(s);

  // Q as GEMM1 A fragments: latent k steps 4 kg .. 4 kg + 3 of both m tiles, and the rope k step rj of m tile rm.
  uint32_t qa[2][4][4], qr[4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    const uint32_t* q0 = reinterpret_cast<const uint32_t*>(
        a.q + (static_cast<int64_t>(t) * a.num_heads + hg * HC + mt * 16 + g) * kMlaQkDim);
    const uint32_t* q8 = q0 + 8 * kMlaQkDim / 2;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      const int w0 = ((kg * 4 + ks) * 16 + 2 * tq) / 2;
      qa[mt][ks][0] = __ldg(q0 + w0);
      qa[mt][ks][1] = __ldg(q8 + w0);
      qa[mt][ks][2] = __ldg(q0 + w0 + 4);
      qa[mt][ks][3] = __ldg(q8 + w0 + 4);
    }
    if (mt == rm) {
      const int w0 = (kMlaLatentDim + rj * 16 + 2 * tq) / 2;
      qr[0] = __ldg(q0 + w0);
      qr[1] = __ldg(q8 + w0);
      qr[2] = __ldg(q0 + w0 + 4);
      qr[3] = __ldg(q8 + w0 + 4);
    }
  }

  float* spart = reinterpret_cast<float*>(smem + C::kOffSpart);
  uint32_t* p_s = reinterpret_cast<uint32_t*>(smem + C::kOffP);
  float* alpha_s = reinterpret_cast<float*>(smem + C::kOffAlpha);
  float* lse_s = reinterpret_cast<float*>(smem + C::kOffLse);
  float acc[2][C::kDimTiles][4];  // O: m tile, dims 32 warp + 8 n + 2t (+1), rows g / g + 8
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int n = 0; n < C::kDimTiles; ++n) acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.f;
  float m_run = kNegInf;  // running max (base-2 units) of the owned head (om, og + 8 ohi); same on its 16 lanes
  float l_run = 0.f;      // this lane's share of its running sum

  // ldmatrix row addresses: K (B of GEMM1): tokens 8 kh + (lane & 7), dims k0 + 8 (lane >> 3) (the B fragments
  // of two k16 steps; the x2 rope load uses lanes 0..15); V (transposed, B of GEMM2): (tok 0-7, d),
  // (tok 8-15, d), (tok 0-7, d + 8), (tok 8-15, d + 8).
  const uint32_t k_row = (8 * kh + (lane & 7)) * C::kRowBytes;
  const uint32_t k_off = k_row + (kg * 64 + (lane >> 3) * 8) * 2;
  const uint32_t r_off = k_row + (kMlaLatentDim + rj * 16 + ((lane >> 3) & 1) * 8) * 2;
  const uint32_t v_off = ((lane & 7) + (((lane >> 3) & 1) << 3)) * C::kRowBytes + (warp * 32 + (lane >> 4) * 8) * 2;
  auto tile_of = [&](int step) { return smem_addr(smem + (step % NST) * C::kTileBytes); };
  auto wait_full = [&](int step) { mbar_wait_parity(bar_full + (step % NST) * 8, (step / NST) & 1); };
  // This warp's partial scores of `step`: m tile mt, heads g / g + 8, tokens 8 kh + 2t (+1).
  auto gemm1 = [&](int step, float (&s)[2][4]) {
    const uint32_t tile = tile_of(step);
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) s[mt][0] = s[mt][1] = s[mt][2] = s[mt][3] = 0.f;
#pragma unroll
    for (int kp = 0; kp < 2; ++kp) {
      uint32_t b[4];
      ldmatrix_x4(b, tile + k_off + kp * 64);
      mma_bf16_16816(s[0], qa[0][2 * kp], b[0], b[1]);
      mma_bf16_16816(s[1], qa[1][2 * kp], b[0], b[1]);
      mma_bf16_16816(s[0], qa[0][2 * kp + 1], b[2], b[3]);
      mma_bf16_16816(s[1], qa[1][2 * kp + 1], b[2], b[3]);
    }
    uint32_t b[2];
    ldmatrix_x2(b, tile + r_off);
    if (rm == 0)
      mma_bf16_16816(s[0], qr, b[0], b[1]);
    else
      mma_bf16_16816(s[1], qr, b[0], b[1]);
  };
  // The partial area (one buffer, one mbarrier phase per step).
  auto publish = [&](const float (&s)[2][4]) {
    float* half = spart + kh * C::kHalfFloats;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
      *reinterpret_cast<float4*>(half + ((kg * 2 + mt) * 32 + lane) * 4) = make_float4(s[mt][0], s[mt][1], s[mt][2], s[mt][3]);
    __syncwarp();
    if (lane == 0) mbar_arrive(bar_part);
  };
  auto wait_published = [&](int step) { mbar_wait_parity(bar_part, step & 1); };
  // The owner's softmax of `step`: the 8 k eighths of its score, mask, online softmax of the owned head (16
  // lanes), P (bf16) into GEMM2's A-fragment slot, the rescale factor to alpha_s.
  auto softmax = [&](int step) {
    const float* half = spart + okh * C::kHalfFloats + (og * 4 + otq) * 4 + 2 * ohi + oj;
    float x = 0.f;
#pragma unroll
    for (int q = 0; q < 8; ++q) x += half[((q * 2 + om) * 32) * 4];
    x = s_idx[step * C::kBT + 8 * okh + 2 * otq + oj] >= 0 ? x * a.scale_log2 : kNegInf;
    float mx = x;
#pragma unroll
    for (int o = 1; o < 16; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    // Lazy rescale (variant 10): keep the older max while the new one exceeds it by at most kLazyRescale.
    const float mn = mx > m_run + kLazyRescale ? fmaxf(m_run, mx) : m_run;
    // A head with nothing valid so far keeps max -inf; subtract 0 then so that exp2 gives 0, not NaN.
    const float mu = mn == kNegInf ? 0.f : mn;
    const float al = fast_exp2(m_run - mu);
    m_run = mn;
    const __nv_bfloat16 p = __float2bfloat16_rn(fast_exp2(x - mu));
    l_run = l_run * al + __bfloat162float(p);  // the rounded value that multiplies V
    reinterpret_cast<__nv_bfloat16*>(p_s)[((om * 32 + og * 4 + otq) * 4 + ohi + 2 * okh) * 2 + oj] = p;
    if ((lane & 15) == 0) alpha_s[og * 4 + om * 2 + ohi] = al;
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
  // Rescale (skipped when no head moved its max: alpha = 1 exactly), GEMM2.
  auto gemm2 = [&](int step, const uint32_t (&pa)[2][4], const float4& al) {
    if (__any_sync(0xffffffffu, al.x != 1.f || al.y != 1.f || al.z != 1.f || al.w != 1.f)) {
#pragma unroll
      for (int n = 0; n < C::kDimTiles; ++n) {
        acc[0][n][0] *= al.x;
        acc[0][n][1] *= al.x;
        acc[0][n][2] *= al.y;
        acc[0][n][3] *= al.y;
        acc[1][n][0] *= al.z;
        acc[1][n][1] *= al.z;
        acc[1][n][2] *= al.w;
        acc[1][n][3] *= al.w;
      }
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
  };
  float s[2][4];
  uint32_t pa[2][4];
  float4 al;
  if (nsteps > 0) {
    wait_full(0);
    gemm1(0, s);
    publish(s);
    for (int step = 0; step + 1 < nsteps; ++step) {
      wait_published(step);
      wait_full(step + 1);
      // One basic block: the owner's softmax chain and the next step's GEMM1 chain interleave.
      softmax(step);
      gemm1(step + 1, s);
      // Every owner has written P of `step`, so every warp is past its GEMM2 of step - 1 and every owner has
      // read the partial area: publish the next partials, refill the slot of step - 1 with step + 3.
      load_p(step, pa, al);
      publish(s);
      if (step >= 1 && step + NST - 1 < nsteps) {
        fill(step + NST - 1);
        if (a.l2_ahead > 0) l2_prefetch(step + NST - 1 + a.l2_ahead);
      }
      gemm2(step, pa, al);
    }
    wait_published(nsteps - 1);
    softmax(nsteps - 1);
    load_p(nsteps - 1, pa, al);
    gemm2(nsteps - 1, pa, al);
  }
  // The owned head's total sum (its 16 lanes), 1 / l (into alpha_s, after the barrier) and the LSE.
  float l = l_run;
#pragma unroll
  for (int o = 1; o < 16; o <<= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
  __syncthreads();  // every warp is past its last GEMM2 (and its reads of alpha_s); every copy has landed
  if ((lane & 15) == 0) {
    alpha_s[og * 4 + om * 2 + ohi] = l > 0.f ? 1.f / l : 0.f;
    lse_s[om * 16 + og + 8 * ohi] = l > 0.f ? m_run + log2f(l) : kNegInf;
  }
  __syncthreads();
  float* stg = reinterpret_cast<float*>(smem);
  {
    const float4 il = *reinterpret_cast<const float4*>(alpha_s + g * 4);
    const float inv[2][2] = {{il.x, il.y}, {il.z, il.w}};
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      float* r0 = stg + (mt * 16 + g) * kStgStride + warp * 32 + 2 * tq;
      float* r1 = r0 + 8 * kStgStride;
#pragma unroll
      for (int n = 0; n < C::kDimTiles; ++n) {
        *reinterpret_cast<float2*>(r0 + n * 8) = make_float2(acc[mt][n][0] * inv[mt][0], acc[mt][n][1] * inv[mt][0]);
        *reinterpret_cast<float2*>(r1 + n * 8) = make_float2(acc[mt][n][2] * inv[mt][1], acc[mt][n][3] * inv[mt][1]);
      }
    }
  }
  __syncthreads();
  write_outputs<HC, C::kThreads>(a, stg, lse_s, t, hg, split, tid);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

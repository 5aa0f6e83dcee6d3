// Sparse MLA kernel variant 9 (session 5): the alternating-step kernel, bf16 records, 32 heads per CTA.
//
// Why: Nsight Compute of variant 5 at T=128 H=64 (scripts/gpu_mla_profile.sh, docs/PERFORMANCE.md "Session 5")
// counts ~1,060 shared-memory wavefronts per 16-token step of a 32-head CTA (K read by both 16-head groups:
// 288; V read by both: 256; scalar partial-score stores and loads with 2-way bank conflicts: 256; the bulk
// copies' writes: 144), the tensor pipe 25-29% busy and the consumers stalled on latency. Variant 5 splits
// the heads between its two consumer groups, so every K / V fragment a warp loads feeds only 2 MMAs. Here
// the two groups split the STEPS instead: group p runs GEMM1 and the softmax of steps s = p, p + 2, ... for
// all 32 heads, so each K fragment feeds 4 MMAs and K is read once per step; GEMM2 is split by output dims
// over all 8 warps (64 dims x 32 heads each, 64 fp32 accumulators as before), so V is read once too and each
// V fragment feeds 4 MMAs. Per step and CTA: K 144 + V 128 + P 64 + partials 64 + 64 (conflict-free) + bulk
// writes 144 ~ 640 wavefronts.
//
//   the gather       no producer warp (a ninth warp would cap every thread at 168 registers: an SM
//                    sub-partition's 16K registers over 3 warps; with 8 warps the cap is 255, and the 72 Q
//                    registers + 64 accumulators of a warp fit). Lanes 0..15 of a warp copy the 16 records of
//                    a step with one cp.async.bulk each (sm_90+; sm_80: 16-byte cp.async) into a ring of 4
//                    slots with a "full" mbarrier each; the last of the 8 warps to finish its GEMM2 of a
//                    step (a shared-memory counter per slot) refills that slot with step + 4 at once; warp 0
//                    issues the first 4. The step's valid-entry mask goes with the slot (no index staging).
//   group p (4 warps, steps of parity p)
//                    GEMM1(s): warp wq = k quarter wq of all 32 heads (Q^T fragments: 72 registers), partial
//                    scores -> spart[p] (rows of 20 floats: conflict-free scalar stores and LDS.128 loads)
//                    -> named barrier of the group -> softmax(s): thread (head, 4 tokens) against the group's
//                    OWN running max (the first version of this kernel passed one running max between the
//                    groups and measured every softmax waiting for the other group's: 1.6x slower than
//                    variant 5); P(s) and the group's max m(s) -> P slot s % 3 -> mbarrier pfull.
//   every warp       GEMM2(u) for every step u in order, as soon as P(u) is published: the accumulators are
//                    kept in units of the larger of the two groups' maxima seen so far (rescaled when it
//                    grows); the P^T fragments of the group whose max is below it are scaled by exp2(m - M)
//                    in registers; O^T[64 w .. 64 w + 63 dims, 32 heads] += V^T P^T; then the P slot is released
//                    (pempty) and the warp counts itself done with the ring slot.
// The groups overlap: while one runs its softmax, the other's MMAs run. Each group's softmax sum is kept in the
// units of its own max and merged in the epilogue.
// Only mma.sync, ldmatrix, cp.async(.bulk), mbarrier and named barriers (sm_80 / sm_90 / sm_120); <= 99 KB of
// shared memory (static_assert).
#pragma once

#include "kernels/attention/sparse_mla_common.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

template <int HC>
struct AltCfg {
  static_assert(HC == 32, "the alternating-step kernel is built for 32 heads per CTA");
  static constexpr int kGroupThreads = 128;  // 4 warps per step-parity group
  static constexpr int kWarps = 8;           // 2 per SM sub-partition: up to 255 registers per thread
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kBT = 16;                             // tokens per step
  static constexpr int kNT1 = HC / 8;                        // GEMM1 n8 head tiles per warp: all heads
  static constexpr int kKQ = 4;                              // GEMM1 k quarters, one per warp of a group
  static constexpr int kKSteps = kMlaQkDim / 16 / kKQ;       // 9
  static constexpr int kDimsPerWarp = kMlaLatentDim / kWarps;  // 64
  static constexpr int kMT2 = kDimsPerWarp / 16;                      // 4
  static constexpr int kNT2 = HC / 8;                                 // 4
  static constexpr int kRowBytes = kMlaBf16RecordBytes + 16;  // rows 4 banks apart: conflict-free ldmatrix
  static constexpr int kTileBytes = kBT * kRowBytes;          // 18688
  static constexpr int kRing = 4;
  static constexpr int kNP = 3;          // P slots (P and the group's max after one step)
  static constexpr int kSpartRow = 20;   // floats per (k quarter, head) row: 16 tokens + 4 (bank spread)
  static constexpr int kSpartFloats = kKQ * HC * kSpartRow;  // per group
  static constexpr int kPRowBytes = (kBT + 8) * 2;           // P[head][tok], 48-byte rows: conflict-free ldmatrix
  static constexpr int kPSlotBytes = HC * kPRowBytes + HC * 4;  // P, m[HC] (the group's running max)
  static constexpr int kOffSpart = kRing * kTileBytes;
  static constexpr int kOffP = kOffSpart + 2 * kSpartFloats * 4;
  static constexpr int kOffL = kOffP + kNP * kPSlotBytes;  // epilogue: per group sums and maxima [2][HC] x 2
  static constexpr int kOffInvL = kOffP;  // epilogue (the P slots are free by then): 1 / l and the LSE
  static constexpr int kOffLse = kOffInvL + HC * 4;
  static constexpr int kOffMask = kOffL + 4 * HC * 4;  // [kRing] valid-entry masks
  static constexpr int kOffDone = kOffMask + kRing * 4;  // [kRing] warps done with the slot's step
  static constexpr int kOffBar = kOffDone + kRing * 4;
  // full[kRing], pfull[kNP], pempty[kNP]
  static constexpr int kSmemBytes = kOffBar + (kRing + 2 * kNP) * 8;
  static_assert(kSmemBytes <= 99 * 1024, "SM120 allows at most 99 KB of shared memory per block");
  static_assert(HC * kStgStride * 4 <= kOffSpart, "epilogue staging must fit in the ring");
  static_assert(kOffSpart % 16 == 0 && kOffP % 16 == 0 && kOffBar % 8 == 0, "alignment");
};

// One step's gather by lanes 0..15 of the calling warp (lane r: entry r of the step, slot index idx or -1):
// one cp.async.bulk per valid record on sm_90+ (16-byte cp.async on sm_80), zeros for an unused entry (V must
// stay finite: P is 0 there, and 0 * NaN would poison O); lane 0 publishes the valid-entry mask with its
// arrival on the slot's "full" barrier (32 arrivals: the whole warp calls this).
template <class C>
__device__ __forceinline__ void alt_issue_step(uint8_t* smem, uint32_t bar_full, uint32_t* mask_s, int slot,
                                               int idx, const RowCache& rc, int lane) {
  using namespace mma;
  const int r = lane & 15;
  const bool valid = lane < 16 && idx >= 0 && idx < rc.num_slots;
  const uint32_t vmask = __ballot_sync(0xffffffffu, valid);
  uint8_t* row = smem + slot * C::kTileBytes + r * C::kRowBytes;
  if (lane < 16 && !valid) {
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    for (int c = 0; c < kMlaBf16RecordBytes / 16; ++c) *reinterpret_cast<uint4*>(row + c * 16) = z;
  }
  if (lane == 0) mask_s[slot] = vmask;
  const uint32_t bar = bar_full + slot * 8;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  fence_proxy_async_smem();  // this lane's earlier generic stores to the slot before the async writes
  if (lane == 0) mbar_arrive_expect_tx(bar, __popc(vmask) * kMlaBf16RecordBytes);
  if (valid)
    bulk_copy_g2s(smem_addr(row), rc.base + static_cast<int64_t>(idx) * kMlaBf16RecordBytes, kMlaBf16RecordBytes,
                  bar);
  if (lane != 0) mbar_arrive(bar);
#else
  // sm_80: 16-byte cp.async per chunk, arriving when this lane's copies land (lane 0: after the mask store,
  // its plain arrival; the barrier counts 33 there).
  if (valid) {
    const uint8_t* src = rc.base + static_cast<int64_t>(idx) * kMlaBf16RecordBytes;
    for (int c = 0; c < kMlaBf16RecordBytes / 16; ++c) cp_async_16_l2_128(smem_addr(row) + c * 16, src + c * 16, 16);
  }
  cp_async_mbar_arrive_noinc(bar);
  if (lane == 0) mbar_arrive(bar);
#endif
}

template <int HC>
__global__ void __launch_bounds__(AltCfg<HC>::kThreads, 1) sparse_mla_alt_kernel(const KernelArgs a) {
  using C = AltCfg<HC>;
  using namespace mma;
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr int NST = C::kRing, NP = C::kNP;
  extern __shared__ __align__(16) uint8_t smem[];

  const CtaPlace place = cta_place<HC>(a);
  const int hg = place.hg, split = place.split, t = place.t;
  const RowCache rc = row_cache(a, t);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  allow_dependent_launch();  // the combine kernel (PDL)

  const SplitSpan span = split_span<C::kBT>(a, t, split);
  const int nsteps = span.nsteps;
  const int32_t* row_idx = a.indices + static_cast<int64_t>(t) * a.topk + span.first;
  // Entry r of step `step` of the split (lanes 0..15), -1 past the split's count; alt_issue_step checks the
  // value (not here: the load's latency must not stall the caller).
  auto entry = [&](int step) {
    const int e = step * C::kBT + (lane & 15);
    int idx = -1;
    if (lane < 16 && step < nsteps && e < span.cnt) idx = __ldg(row_idx + e);
    return idx;
  };

  const int par = warp >> 2;  // consumer group = the parity of its GEMM1 / softmax steps
  const int wq = warp & 3;    // GEMM1 k quarter; softmax heads 8 wq .. 8 wq + 7

  const uint32_t bar_full = smem_addr(smem + C::kOffBar);
  const uint32_t bar_pfull = bar_full + NST * 8;
  const uint32_t bar_pempty = bar_pfull + NP * 8;
  uint32_t* mask_s = reinterpret_cast<uint32_t*>(smem + C::kOffMask);
  int* done_s = reinterpret_cast<int*>(smem + C::kOffDone);
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < NST; ++s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      mbar_init(bar_full + s * 8, 32);
#else
      mbar_init(bar_full + s * 8, 33);
#endif
      done_s[s] = 0;
    }
#pragma unroll
    for (int s = 0; s < NP; ++s) {
      mbar_init(bar_pfull + s * 8, C::kGroupThreads);  // every thread of the group that ran the softmax
      mbar_init(bar_pempty + s * 8, C::kWarps);         // every warp, after its GEMM2 of the step
    }
  }
  __syncthreads();
  // The first NST steps: warp 0 gathers them before it starts computing.
  if (warp == 0)
    for (int s = 0; s < NST && s < nsteps; ++s) alt_issue_step<C>(smem, bar_full, mask_s, s, entry(s), rc, lane);

  float acc[C::kMT2][C::kNT2][4];  // O^T of dims d0 .. d0 + 63, all heads
  zero_acc(acc);
  const int d0 = warp * C::kDimsPerWarp;
  uint32_t qf[C::kKSteps][C::kNT1][2];
  load_q_fragments(qf, a.q + (static_cast<int64_t>(t) * a.num_heads + hg * HC) * kMlaQkDim, wq * C::kKSteps, lane);
  float* spart = reinterpret_cast<float*>(smem + C::kOffSpart) + par * C::kSpartFloats;
  const int g = lane >> 2, tq = lane & 3;
  // Softmax role: head sh = 8 wq + (lane & 7), tokens 4 ssub .. 4 ssub + 3 (ssub = lane >> 3): the 8 lanes of
  // one LDS.128 phase read 8 different heads, whose 20-float rows put them in 8 different bank quads.
  const int sh = 8 * wq + (lane & 7), ssub = lane >> 3;
  // Each group keeps its own running max m_own over its own steps (no wait on the other group) and its sum
  // l_own, this thread's share, in units of exp2(-mu_own) (mu_own = m_own, or 0 while m_own = -inf).
  float l_own = 0.f, m_own = kNegInf, mu_own = 0.f;
  // GEMM2's accumulators are in units of exp2(-M) with M the max of both groups' published maxima so far:
  // per head, for the heads of this lane's accumulators (mc: heads 8 nt + 2 tq + {0, 1}) and of its P^T
  // fragments (mb: heads 8 nt + g). A step of the group whose max is below M enters with its P scaled by
  // exp2(m - M).
  float mc[C::kNT2][2], mb[C::kNT2];
#pragma unroll
  for (int nt = 0; nt < C::kNT2; ++nt) mc[nt][0] = mc[nt][1] = mb[nt] = kNegInf;
  auto tile_of = [&](int step) { return smem_addr(smem + (step % NST) * C::kTileBytes); };
  auto pslot = [&](int step) { return smem + C::kOffP + (step % NP) * C::kPSlotBytes; };

  // GEMM2 of step u by this warp (dims d0 .. d0 + 63 of all heads), then the P slot is released, and the
  // ring slot: the last of the 8 warps to finish with it gathers step u + NST into it at once.
  int pre_idx = entry(NST);  // the entries of step u + NST, loaded one GEMM2 ahead (latency off the chain)
  auto gemm2 = [&](int u) {
    const int nidx = pre_idx;
    pre_idx = entry(u + 1 + NST);
    mbar_wait_parity(bar_pfull + (u % NP) * 8, (u / NP) & 1);
    const uint8_t* ps = pslot(u);
    const float* mpub = reinterpret_cast<const float*>(ps + HC * C::kPRowBytes);
    float al[C::kNT2][2], be[C::kNT2];
    bool moved = false, scaled = false;
#pragma unroll
    for (int nt = 0; nt < C::kNT2; ++nt) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float m = mpub[nt * 8 + 2 * tq + i];
        const float mn = fmaxf(mc[nt][i], m);
        al[nt][i] = mn > mc[nt][i] ? exp2f(mc[nt][i] - mn) : 1.f;  // 0 from -inf: the accumulators are 0 then
        moved |= al[nt][i] != 1.f;
        mc[nt][i] = mn;
      }
      const float m = mpub[nt * 8 + g];
      const float mn = fmaxf(mb[nt], m);
      be[nt] = m < mn ? exp2f(m - mn) : 1.f;  // (m = -inf: P is 0 there anyway)
      scaled |= be[nt] != 1.f;
      mb[nt] = mn;
    }
    if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
      for (int nt = 0; nt < C::kNT2; ++nt)
#pragma unroll
        for (int mt = 0; mt < C::kMT2; ++mt) {
          acc[mt][nt][0] *= al[nt][0];
          acc[mt][nt][1] *= al[nt][1];
          acc[mt][nt][2] *= al[nt][0];
          acc[mt][nt][3] *= al[nt][1];
        }
    }
    uint32_t bfr[C::kNT2][2];
    pv_load_p(bfr, smem_addr(ps), C::kPRowBytes, lane);
    if (__any_sync(0xffffffffu, scaled)) {
#pragma unroll
      for (int nt = 0; nt < C::kNT2; ++nt)
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          __nv_bfloat162 b = *reinterpret_cast<const __nv_bfloat162*>(&bfr[nt][i]);
          const float2 f = __bfloat1622float2(b);
          bfr[nt][i] = pack_bf16x2(f.x * be[nt], f.y * be[nt]);
        }
    }
#pragma unroll
    for (int mt = 0; mt < C::kMT2; ++mt) pv_mt(acc, bfr, tile_of(u), C::kRowBytes, d0, mt, lane);
    __syncwarp();
    int last = 0;
    if (lane == 0) {
      mbar_arrive(bar_pempty + (u % NP) * 8);
      __threadfence_block();  // this warp's reads of the slot before the count (release)
      last = atomicAdd(done_s + u % NST, 1) == C::kWarps - 1;
      if (last) {
        done_s[u % NST] = 0;
        __threadfence_block();  // every warp's reads before the refill (acquire)
      }
    }
    if (__shfl_sync(0xffffffffu, last, 0) && u + NST < nsteps)
      alt_issue_step<C>(smem, bar_full, mask_s, u % NST, nidx, rc, lane);
  };

  int next_g2 = 0;  // the next step this warp owes a GEMM2
  for (int s = par; s < nsteps; s += 2) {
    // GEMM1(s): S^T[16 tok x HC heads] over k quarter wq.
    mbar_wait_parity(bar_full + (s % NST) * 8, (s / NST) & 1);
    {
      QkAcc<C::kNT1> q;
      q.zero();
      const uint32_t a_base = qk_a_base(tile_of(s), C::kRowBytes, wq, C::kKSteps, lane);
#pragma unroll
      for (int ks = 0; ks < C::kKSteps; ++ks) qk_kstep(q, qf, a_base, ks);
      float* sp = spart + wq * HC * C::kSpartRow;
#pragma unroll
      for (int nt = 0; nt < C::kNT1; ++nt) {
        const int h = nt * 8 + 2 * tq;
        sp[h * C::kSpartRow + g] = q.s[0][nt][0];
        sp[(h + 1) * C::kSpartRow + g] = q.s[0][nt][1];
        sp[h * C::kSpartRow + g + 8] = q.s[0][nt][2];
        sp[(h + 1) * C::kSpartRow + g + 8] = q.s[0][nt][3];
      }
    }
    named_bar_sync(1 + par, C::kGroupThreads);  // the group's partial scores visible
    // softmax(s)
    {
      float4 v = *reinterpret_cast<const float4*>(spart + sh * C::kSpartRow + 4 * ssub);
#pragma unroll
      for (int kq = 1; kq < C::kKQ; ++kq) {
        const float4 w = *reinterpret_cast<const float4*>(spart + (kq * HC + sh) * C::kSpartRow + 4 * ssub);
        v.x += w.x;
        v.y += w.y;
        v.z += w.z;
        v.w += w.w;
      }
      const uint32_t m4 = mask_s[s % NST] >> (4 * ssub);
      float sv[4] = {v.x, v.y, v.z, v.w};
      float mx = kNegInf;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        sv[j] = (m4 >> j) & 1u ? sv[j] * a.scale_log2 : kNegInf;
        mx = fmaxf(mx, sv[j]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
      // This P slot free again (every warp's GEMM2 of step s - NP done).
      if (s >= NP) mbar_wait_parity(bar_pempty + (s % NP) * 8, ((s / NP) - 1) & 1);
      const float mn = fmaxf(m_own, mx);
      // A head with nothing valid so far keeps max -inf; subtract 0 then so that exp2 gives 0, not NaN.
      const float mu = mn == kNegInf ? 0.f : mn;
      uint8_t* ps = pslot(s);
      float ps_sum = 0.f;
      uint32_t pw[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const __nv_bfloat162 pb = __floats2bfloat162_rn(exp2f(sv[2 * j] - mu), exp2f(sv[2 * j + 1] - mu));
        const float2 pf = __bfloat1622float2(pb);
        ps_sum += pf.x + pf.y;  // the rounded probabilities: exactly what GEMM2 multiplies V with
        pw[j] = *reinterpret_cast<const uint32_t*>(&pb);
      }
      *reinterpret_cast<uint2*>(ps + sh * C::kPRowBytes + 8 * ssub) = make_uint2(pw[0], pw[1]);
      l_own = l_own * exp2f(mu_own - mu) + ps_sum;  // (mu only grows: a factor <= 1; 0 * anything first)
      mu_own = mu;
      m_own = mn;
      if (ssub == 0) reinterpret_cast<float*>(ps + HC * C::kPRowBytes)[sh] = mn;  // m(s) of this group
      mbar_arrive(bar_pfull + (s % NP) * 8);
    }
    // GEMM2 of the other group's step s - 1 (if still owed) and of this step.
    for (; next_g2 <= s; ++next_g2) gemm2(next_g2);
  }
  for (; next_g2 < nsteps; ++next_g2) gemm2(next_g2);  // the other group's last step

  // This group's sum per head (over its 4 threads), with the max it is in units of.
  float l = l_own;
  l += __shfl_xor_sync(0xffffffffu, l, 8);
  l += __shfl_xor_sync(0xffffffffu, l, 16);
  float* lsum = reinterpret_cast<float*>(smem + C::kOffL);
  if (ssub == 0) {
    lsum[par * HC + sh] = l;
    lsum[(2 + par) * HC + sh] = m_own;
  }
#if !(defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
  cp_async_wait_all();
#endif
  __syncthreads();  // every GEMM2 done, every copy consumed, the group sums written
  float* inv_l_s = reinterpret_cast<float*>(smem + C::kOffInvL);
  float* lse_s = reinterpret_cast<float*>(smem + C::kOffLse);
  if (tid < HC) {
    // O is in units of exp2(-M), M = the larger group max (0 if neither saw a valid entry); each group's sum
    // in units of its own max (0 likewise).
    const float m0 = lsum[2 * HC + tid], m1 = lsum[3 * HC + tid];
    const float mm = fmaxf(m0, m1);
    const float mu_all = mm == kNegInf ? 0.f : mm;
    float lt = 0.f;
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const float lp = lsum[p * HC + tid];
      if (lp > 0.f) lt += lp * exp2f(lsum[(2 + p) * HC + tid] - mu_all);
    }
    inv_l_s[tid] = lt > 0.f ? 1.f / lt : 0.f;
    lse_s[tid] = lt > 0.f ? mu_all + log2f(lt) : kNegInf;
  }
  __syncthreads();
  float* stg = reinterpret_cast<float*>(smem);
  stage_outputs(acc, inv_l_s, stg, 0, d0, lane);
  __syncthreads();
  write_outputs<HC, C::kThreads>(a, stg, lse_s, t, hg, split, tid);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

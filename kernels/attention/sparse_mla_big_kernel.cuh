// The 32-token-step sparse MLA kernel (session 4, kernel_variant 8; bf16 records): one CTA = one query
// token x HC heads x one split, as the other kernels, built for the compute-bound shapes (T >= 128 with
// 32 heads per CTA), where round 3's warp-specialized kernel (variant 5) runs at ~17% of the bf16 tensor
// rate, bound by its per-16-token-step chain and by shared-memory operand traffic (each K / V fragment a
// warp loads with ldmatrix feeds only 16 heads = 2 MMAs: ~13 FLOP per byte of shared memory read).
//
// 8 warps (256 threads), all of them computing; one 32-token step (two 16-token ring slots) at a time:
//   GEMM1   warp w = (k quarter kq = w % 4, token half th = w / 4): partial scores S^T[16 tokens x HC heads]
//           over its 144 k, Q^T fragments of all HC heads in registers (72 at HC = 32); each K fragment feeds
//           HC / 8 MMAs (4 at HC = 32, twice variant 5's);
//   bar, softmax of 32 tokens (8 threads per head at HC = 32, 4 tokens each; partials read as float4), bar;
//   GEMM2   warp w owns output dims 64 w .. 64 w + 63 of all HC heads (O^T: 64 fp32 per thread at HC = 32);
//           each V^T fragment feeds HC / 8 MMAs.
// Gather: a ring of four 16-token slots filled by cp.async.bulk, one 1152-byte record per lane (sm_90+;
// sm_80: 16-byte cp.async, correct but slow). There is no producer warp: a ninth warp would put three warps
// on one SM sub-partition and cap every thread at 168 registers (16K registers per sub-partition), which
// spills at 32 heads. Instead, each warp counts itself out of a slot (a shared-memory counter) after its
// last read of it, and the last of the 8 warps issues the slot's refill at once (the fill two steps ahead;
// it loaded those indices at the top of the step), so the refill starts exactly when a producer warp
// waiting on an "empty" mbarrier would have started it. The filler also writes the slot's cleaned indices
// next to it (the softmax masks with them), so no 8 KB index staging area is needed (it would not fit).
// Against variant 5 (two 4-warp groups of 16 heads, 16-token steps): the records are read from shared
// memory once per CTA instead of once per 16-head group (K + V + partials + P: ~117 KB per 32 tokens x 32
// heads instead of ~178 KB), and one barrier pair and softmax pass serve 32 tokens instead of 16. What it
// gives up: the two groups' overlap (one group: the tensor cores idle during the softmax) and ring depth
// (one 32-token step ahead, against three 16-token steps).
// Shared memory <= 99 KB (static_assert); mma.sync, ldmatrix, cp.async(.bulk), mbarrier, named barriers only.
// Measured on the H200 (docs/PERFORMANCE.md, "Session 4 (mla-big)"): 1.5x SLOWER than variant 5 at T=128 H=64
// and in prefill: losing the two groups' overlap costs more than the halved barriers and operand traffic gain.
// Selectable only (kernel_variant 8 with GLM5RT_MLA_V8=32).
#pragma once

#include "kernels/attention/sparse_mla_common.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

// Minimum CTAs per SM the 16-head kernel is compiled for: two where an SM's shared memory holds two (H100 /
// H200), one on SM120 (100 KB per SM: one CTA anyway; two would cap the registers at 128 and spill).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
#define GLM5RT_MLA_BIG_MINB_SMALL 1
#else
#define GLM5RT_MLA_BIG_MINB_SMALL 2
#endif

template <int HC>
struct BigCfg {
  static constexpr int kWarps = 8;
  static constexpr int kThreads = kWarps * 32;
  // 32 heads: 72 Q + 64 O registers per thread, one CTA per SM; 16 / 8 heads fit two (shared memory too).
  static constexpr int kMinBlocks = HC >= 32 ? 1 : GLM5RT_MLA_BIG_MINB_SMALL;
  static constexpr int kBT = 32;                        // tokens per step (two m16 tiles, two slots)
  static constexpr int kSlotTok = 16;                   // tokens per ring slot
  static constexpr int kNT = HC / 8;                    // n8 head tiles (GEMM1 N, GEMM2 N)
  static constexpr int kKQ = 4;                         // GEMM1 k-split
  static constexpr int kKSteps = kMlaQkDim / 16 / kKQ;  // 9
  static constexpr int kDimsPerWarp = kMlaLatentDim / kWarps;  // 64
  static constexpr int kMT2 = kDimsPerWarp / 16;               // 4
  static constexpr int kTPH = kThreads / HC;  // softmax threads per head: 8 / 16 / 32
  static constexpr int kTPT = kBT / kTPH;     // tokens per softmax thread: 4 / 2 / 1
  static_assert(kTPT >= 1 && kTPH <= 32, "softmax thread grid");
  static constexpr int kRowBytes = kMlaBf16RecordBytes + 16;  // rows 4 banks apart: conflict-free ldmatrix
  static constexpr int kSlotBytes = kSlotTok * kRowBytes;     // 18688
  static constexpr int kRing = 4;                             // 16-token slots (two 32-token steps)
  static constexpr int kRingBytes = kRing * kSlotBytes;
  static_assert(HC * kStgStride * 4 <= kRingBytes, "epilogue staging must fit in the ring");
  static constexpr int kSpartFloats = kKQ * HC * kBT;  // [kq][head][32 tok]
  static constexpr int kPRowBytes = (kBT + 8) * 2;      // P[head][tok], 80-byte rows: conflict-free ldmatrix
  static constexpr int kOffSpart = kRingBytes;
  static constexpr int kOffP = kOffSpart + kSpartFloats * 4;
  static constexpr int kOffAlpha = kOffP + HC * kPRowBytes;
  static constexpr int kOffInvL = kOffAlpha + HC * 4;
  static constexpr int kOffLse = kOffInvL + HC * 4;
  static constexpr int kOffSlotIdx = kOffLse + HC * 4;              // [kRing][16] cleaned indices per slot
  static constexpr int kOffCount = kOffSlotIdx + kRing * kSlotTok * 4;  // [kRing] warps done with the slot
  static constexpr int kOffBar = (kOffCount + kRing * 4 + 15) / 16 * 16;  // full[kRing]
  static constexpr int kSmemBytes = kOffBar + kRing * 8;
  static_assert(kSmemBytes <= 99 * 1024, "SM120 allows at most 99 KB of shared memory per block");
  static_assert(kOffSpart % 16 == 0 && kOffP % 16 == 0 && kOffBar % 8 == 0, "alignment");
};

// Partial scores [kq][head][32 tok]: the GEMM1 stores (a warp: 8 tokens g x 4 head pairs tq per register)
// would put the four tq on the same banks; XOR the token with 8 * ((h >> 1) & 3) spreads them over all 32.
// The XOR keeps 4-token groups contiguous, so the softmax reads a thread's 4 tokens as one float4.
template <int HC>
__device__ __forceinline__ int big_spart_off(int kq, int h, int tok) {
  return (kq * HC + h) * 32 + (tok ^ (((h >> 1) & 3) << 3));
}

template <int HC>
__global__ void __launch_bounds__(BigCfg<HC>::kThreads, BigCfg<HC>::kMinBlocks)
    sparse_mla_big_kernel(const KernelArgs a) {
  using C = BigCfg<HC>;
  using namespace mma;
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr int NST = C::kRing;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kBulk = true;
#else
  constexpr bool kBulk = false;
#endif
  extern __shared__ __align__(16) uint8_t smem[];

  const int groups = a.num_heads / HC;
  int bid = blockIdx.x;
  const int hg = bid % groups;
  bid /= groups;
  const int split = bid % a.nsplit;
  const int t = bid / a.nsplit;
  const RowCache rc = row_cache(a, t);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");  // see sparse_mla_ws_kernel
#endif

  int len = a.topk;
  if (a.lengths != nullptr) len = min(max(__ldg(a.lengths + t), 0), a.topk);
  const int first = split * a.tiles_per_split * kTileTokens;
  const int cnt = max(min(len, first + a.tiles_per_split * kTileTokens) - first, 0);
  const int nsteps = (cnt + C::kBT - 1) / C::kBT;
  const int nfills = 2 * nsteps;  // 16-token slot fills
  const int32_t* row_idx = a.indices + static_cast<int64_t>(t) * a.topk + first;
  const int kq = warp % 4, th = warp / 4;

  int* slot_idx = reinterpret_cast<int*>(smem + C::kOffSlotIdx);
  int* slot_count = reinterpret_cast<int*>(smem + C::kOffCount);
  const uint32_t bar_full = smem_addr(smem + C::kOffBar);
  // Entry r (lanes 0..15) of fill j, cleaned: -1 past the split's length, negative, or outside the pool.
  auto load_idx = [&](int j) {
    const int e = j * C::kSlotTok + (lane & 15);
    const int v = j < nfills && e < cnt ? __ldg(row_idx + e) : -1;
    return (v >= 0 && v < rc.num_slots) ? v : -1;
  };
  // Fill j into its slot (the whole warp calls it; lanes 0..15 own one record each, idx = load_idx(j)).
  // Unused entries are zero-filled: V must stay finite (P is 0 there, and 0 * NaN would poison O).
  auto fill = [&](int j, int idx) {
    const int slot = j % NST, r = lane & 15;
    uint8_t* tile = smem + slot * C::kSlotBytes;
    const uint32_t bar = bar_full + slot * 8;
    const bool valid = idx >= 0;
    if constexpr (kBulk) {
      fence_proxy_async_smem();  // the slot's earlier generic accesses (zero fills) before the async writes
      if (lane < 16) {
        slot_idx[slot * C::kSlotTok + r] = idx;
        if (!valid) {
          uint8_t* row = tile + r * C::kRowBytes;
          const uint4 z = make_uint4(0u, 0u, 0u, 0u);
          for (int c = 0; c < kMlaBf16RecordBytes / 16; ++c) *reinterpret_cast<uint4*>(row + c * 16) = z;
        }
      }
      const uint32_t nvalid = __popc(__ballot_sync(0xffffffffu, lane < 16 && valid));
      __syncwarp();  // the lanes' index and zero stores before lane 0's arrival (which releases them)
      if (lane == 0) mbar_arrive_expect_tx(bar, nvalid * kMlaBf16RecordBytes);
      if (lane < 16 && valid)
        bulk_copy_g2s(smem_addr(tile + r * C::kRowBytes), rc.base + static_cast<int64_t>(idx) * kMlaBf16RecordBytes,
                      kMlaBf16RecordBytes, bar);
    } else {
      if (lane < 16) slot_idx[slot * C::kSlotTok + r] = idx;
      __syncwarp();
      const uint32_t dst0 = smem_addr(tile);
      constexpr int kChunks = kMlaBf16RecordBytes / 16;
      for (int c = lane; c < C::kSlotTok * kChunks; c += 32) {
        const int rr = c / kChunks, col = c - rr * kChunks;
        const int ix = slot_idx[slot * C::kSlotTok + rr];
        const bool ok = ix >= 0;
        const uint8_t* src = ok ? rc.base + static_cast<int64_t>(ix) * kMlaBf16RecordBytes + col * 16 : rc.base;
        cp_async_16_l2_128(dst0 + rr * C::kRowBytes + col * 16, src, ok ? 16 : 0);
      }
      cp_async_mbar_arrive_noinc(bar);  // each lane once its copies have landed (32 of the count)
      __syncwarp();
      if (lane == 0) mbar_arrive(bar);  // and lane 0 for the index stores (the 33rd)
    }
  };

  uint32_t qf[C::kKSteps][C::kNT][2];
  load_q_fragments(qf, a.q + (static_cast<int64_t>(t) * a.num_heads + hg * HC) * kMlaQkDim, kq * C::kKSteps, lane);

  if (tid < NST) {
    mbar_init(bar_full + tid * 8, kBulk ? 1 : 33);
    slot_count[tid] = 0;
  }
  __syncthreads();  // barriers initialised before any arrival
  if (warp == 0) {
    int first_idx[NST];  // all four loads in flight at once
#pragma unroll
    for (int j = 0; j < NST; ++j) first_idx[j] = load_idx(j);
#pragma unroll
    for (int j = 0; j < NST; ++j)
      if (j < nfills) fill(j, first_idx[j]);
  }

  float acc[C::kMT2][C::kNT][4];
#pragma unroll
  for (int i = 0; i < C::kMT2; ++i)
#pragma unroll
    for (int j = 0; j < C::kNT; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
  float* inv_l_s = reinterpret_cast<float*>(smem + C::kOffInvL);
  float* lse_s = reinterpret_cast<float*>(smem + C::kOffLse);
  float* spart = reinterpret_cast<float*>(smem + C::kOffSpart);
  __nv_bfloat16* p_s = reinterpret_cast<__nv_bfloat16*>(smem + C::kOffP);
  float* alpha_s = reinterpret_cast<float*>(smem + C::kOffAlpha);
  const uint32_t p_addr = smem_addr(p_s);
  const int d0 = warp * C::kDimsPerWarp;
  const int g = lane >> 2, tq = lane & 3;
  const int sh = tid / C::kTPH, ssub = tid % C::kTPH;  // softmax role: head sh, tokens ssub * kTPT + j
  float m_run = kNegInf;  // running max of head sh (base-2 units), identical on its kTPH threads
  float l_run = 0.f;      // this thread's share of head sh's running sum
  auto slot_addr = [&](int j) { return smem_addr(smem + (j % NST) * C::kSlotBytes); };

  for (int step = 0; step < nsteps; ++step) {
    const int j0 = 2 * step;
    // The indices of the fills this warp may have to issue at the end of the step (if it is the last out of
    // the slots), loaded now so that their latency hides under the step.
    const int idx_a = load_idx(j0 + NST), idx_b = load_idx(j0 + 1 + NST);
    mbar_wait_parity(bar_full + (j0 % NST) * 8, (j0 / NST) & 1);
    mbar_wait_parity(bar_full + ((j0 + 1) % NST) * 8, ((j0 + 1) / NST) & 1);
    // GEMM1: S^T[16 tokens of half th x HC heads] over k quarter kq.
    {
      QkAcc<C::kNT> q;
      q.zero();
      const uint32_t a_base = qk_a_base(slot_addr(j0 + th), C::kRowBytes, kq, C::kKSteps, lane);
#pragma unroll
      for (int ks = 0; ks < C::kKSteps; ++ks) qk_kstep(q, qf, a_base, ks);
#pragma unroll
      for (int nt = 0; nt < C::kNT; ++nt) {
        const int h = nt * 8 + 2 * tq;
        float v[4] = {q.s[0][nt][0], q.s[0][nt][1], q.s[0][nt][2], q.s[0][nt][3]};
        if constexpr (QkAcc<C::kNT>::kChains == 2) {
          v[0] += q.s[1][nt][0];
          v[1] += q.s[1][nt][1];
          v[2] += q.s[1][nt][2];
          v[3] += q.s[1][nt][3];
        }
        const int tk = th * 16 + g;
        spart[big_spart_off<HC>(kq, h, tk)] = v[0];
        spart[big_spart_off<HC>(kq, h + 1, tk)] = v[1];
        spart[big_spart_off<HC>(kq, h, tk + 8)] = v[2];
        spart[big_spart_off<HC>(kq, h + 1, tk + 8)] = v[3];
      }
    }
    named_bar_sync(1, C::kThreads);  // partial scores visible
    // Online softmax of 32 tokens for head sh: thread ssub owns tokens ssub * kTPT .. + kTPT - 1.
    {
      const int tok0 = ssub * C::kTPT;
      float sv[C::kTPT];
#pragma unroll
      for (int j = 0; j < C::kTPT; ++j) sv[j] = 0.f;
#pragma unroll
      for (int k2 = 0; k2 < C::kKQ; ++k2) {
        if constexpr (C::kTPT == 4) {
          const float4 x = *reinterpret_cast<const float4*>(spart + big_spart_off<HC>(k2, sh, tok0));
          sv[0] += x.x;
          sv[1] += x.y;
          sv[2] += x.z;
          sv[3] += x.w;
        } else {
#pragma unroll
          for (int j = 0; j < C::kTPT; ++j) sv[j] += spart[big_spart_off<HC>(k2, sh, tok0 + j)];
        }
      }
      float mx = kNegInf;
#pragma unroll
      for (int j = 0; j < C::kTPT; ++j) {
        const int tok = tok0 + j;
        const int ix = slot_idx[((j0 + (tok >> 4)) % NST) * C::kSlotTok + (tok & 15)];
        sv[j] = ix >= 0 ? sv[j] * a.scale_log2 : kNegInf;
        mx = fmaxf(mx, sv[j]);
      }
#pragma unroll
      for (int off = 1; off < C::kTPH; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float mn = fmaxf(m_run, mx);
      const float mu = mn == kNegInf ? 0.f : mn;  // nothing valid yet: exp2(-inf - 0) = 0, not NaN
      const float al = exp2f(m_run - mu);
      m_run = mn;
      float ps = 0.f;
      __nv_bfloat16 pb[C::kTPT];
#pragma unroll
      for (int j = 0; j < C::kTPT; ++j) {
        pb[j] = __float2bfloat16(exp2f(sv[j] - mu));
        ps += __bfloat162float(pb[j]);  // the rounded probabilities: exactly what GEMM2 multiplies V with
      }
      __nv_bfloat16* prow = p_s + sh * (C::kPRowBytes / 2) + tok0;
      if constexpr (C::kTPT == 4) {
        uint2 w;
        w.x = static_cast<uint32_t>(__bfloat16_as_ushort(pb[0])) | (static_cast<uint32_t>(__bfloat16_as_ushort(pb[1])) << 16);
        w.y = static_cast<uint32_t>(__bfloat16_as_ushort(pb[2])) | (static_cast<uint32_t>(__bfloat16_as_ushort(pb[3])) << 16);
        *reinterpret_cast<uint2*>(prow) = w;
      } else {
#pragma unroll
        for (int j = 0; j < C::kTPT; ++j) prow[j] = pb[j];
      }
      l_run = l_run * al + ps;
      if (ssub == 0) alpha_s[sh] = al;
    }
    named_bar_sync(1, C::kThreads);  // P and the rescale factors visible
    // GEMM2: O^T[64 dims of this warp x HC heads] = alpha O^T + V^T P^T, 16 tokens (one slot) at a time; after
    // each slot the warp counts itself out, and the last of the 8 refills the slot (fill j + 4) at once.
    pv_rescale(acc, alpha_s, lane);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      uint32_t bfr[C::kNT][2];
      pv_load_p(bfr, p_addr + half * 32, C::kPRowBytes, lane);
      const int j = j0 + half;
      const uint32_t tile = slot_addr(j);
#pragma unroll
      for (int mt = 0; mt < C::kMT2; ++mt) pv_mt(acc, bfr, tile, C::kRowBytes, d0, mt, lane);
      if (j + NST < nfills) {
        int last = 0;
        __syncwarp();  // every lane's reads of the slot issued before the count
        if (lane == 0) {
          __threadfence_block();
          last = atomicAdd(slot_count + j % NST, 1) == C::kWarps - 1;
          if (last) {
            slot_count[j % NST] = 0;  // nobody counts on this slot again before the refill is consumed
            __threadfence_block();
          }
        }
        if (__shfl_sync(0xffffffffu, last, 0)) fill(j + NST, half == 0 ? idx_a : idx_b);
      }
    }
  }
  float l = l_run;
#pragma unroll
  for (int off = 1; off < C::kTPH; off <<= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
  if (ssub == 0) {
    inv_l_s[sh] = l > 0.f ? 1.f / l : 0.f;
    lse_s[sh] = l > 0.f ? m_run + log2f(l) : kNegInf;
  }
  cp_async_wait_all();  // (sm_80 path) nothing lands in the ring after this point
  __syncthreads();      // every warp is past its last GEMM2
  float* stg = reinterpret_cast<float*>(smem);
  stage_outputs(acc, inv_l_s, stg, 0, d0, lane);
  __syncthreads();
  write_outputs<HC, C::kThreads>(a, stg, lse_s, t, hg, split, tid);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

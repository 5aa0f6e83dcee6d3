// Variant 5's warp-specialized kernel with a ring of single-record rows instead of 16-token slots (session 4,
// kernel_variant 8 in its default form; bf16 records; selectable only).
//
// Built on an inference from session 4's first device call (that the compute-bound shapes were bound by the
// gathered bytes in flight per SM) which this kernel's own diagnostics then refuted (docs/PERFORMANCE.md,
// "Session 4 (mla-big), call 2"): measured 0.89x of variant 5. Kept because it is correct, tested, and the
// benchmark's --ring-diag instantiates it without its gather (DIAG = 1) and without its compute (DIAG = 2),
// which is how the bound was measured (variant 5's consumers alone take its whole time).
//   - The ring is N = kRows rows of 1168 bytes (76 at 32 heads per CTA), and a 16-token step occupies rows
//     16 j .. 16 j + 15 (mod N): ldmatrix takes one row address per lane, so an m16 tile may wrap around the
//     end of the ring. With N = 4 * 16 + 12, the first 12 rows of step j are refilled as soon as step j - 5
//     is released and the last 4 when step j - 4 is. A step waits for all 16 rows, so the effective lookahead
//     is variant 5's (the last rows go out when variant 5 refills a whole slot): the measured 0.89x is the
//     cost of the extra per-step work (two producer waits and issue rounds, per-lane row addresses, 2-way
//     ldmatrix conflicts where a tile wraps).
//   - The producer writes each step's cleaned indices into a small per-step ring (8 x 16) instead of staging
//     the split's 2048 indices (8 KB) at the start; one producer warp (variant 5 starts 4 for 32 heads, of
//     which the bulk path uses one).
// Everything else is variant 5's: consumer groups of 4 warps with 16 heads each (8 for H = 8) on their own
// named barrier; GEMM1 k-split partials, softmax_step, pv_step from sparse_mla_common.cuh; one cp.async.bulk
// per 1152-byte record (sm_90+; sm_80: 16-byte cp.async, correct, slow) on per-step "full" mbarriers (two
// arrivals: one per part) and per-step "empty" mbarriers (one arrival per consumer warp).
#pragma once

#include "kernels/attention/sparse_mla_common.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

template <int HC>
struct RingCfg {
  static constexpr int kHG = HC >= 16 ? 16 : HC;  // heads per consumer group
  static constexpr int kGroups = HC / kHG;
  static constexpr int kGroupThreads = 128;
  static constexpr int kConsumerWarps = kGroups * 4;
  static constexpr int kThreads = kConsumerWarps * 32 + 32;  // + one producer warp
  static constexpr int kMinBlocks = HC >= 32 ? 1 : 2;
  static constexpr int kBT = 16;
  static constexpr int kNTw = kHG / 8;
  static constexpr int kKQ = 4;
  static constexpr int kKSteps = kMlaQkDim / 16 / kKQ;  // 9
  static constexpr int kDimsPerWarp = kMlaLatentDim / 4;
  static constexpr int kTPH = kGroupThreads / kHG;
  static constexpr int kRowBytes = kMlaBf16RecordBytes + 16;  // rows 4 banks apart: conflict-free ldmatrix
  static constexpr int kSpartFloats = kKQ * kHG * kBT;  // per group
  static constexpr int kPRowBytes = (kBT + 8) * 2;
  static constexpr int kPBytes = kHG * kPRowBytes;
  static constexpr int kNB = 8;  // per-step barriers and index rows (> steps in flight + 1)
  static constexpr int kOtherBytes = kGroups * (kSpartFloats * 4 + kPBytes) + 3 * HC * 4 + kNB * kBT * 4 + 2 * kNB * 8;
  // As many rows as fit in 99 KB less 1 KB (static shared memory of the fused combine, alignment).
  static constexpr int kRows = (99 * 1024 - 1024 - kOtherBytes) / kRowBytes;
  static_assert(kRows >= 5 * kBT - 16 + 1 && kRows < 6 * kBT, "ring between 4 and 6 steps: see the refill rule");
  static constexpr int kQ = kRows / kBT;        // whole steps in the ring
  static constexpr int kD = kRows % kBT;        // rows of the partial step
  static constexpr int kRingBytes = kRows * kRowBytes;
  static_assert(HC * kStgStride * 4 <= kRingBytes, "epilogue staging must fit in the ring");
  static constexpr int kOffSpart = (kRingBytes + 15) / 16 * 16;
  static constexpr int kOffP = kOffSpart + kGroups * kSpartFloats * 4;
  static constexpr int kOffAlpha = kOffP + kGroups * kPBytes;
  static constexpr int kOffInvL = kOffAlpha + HC * 4;
  static constexpr int kOffLse = kOffInvL + HC * 4;
  static constexpr int kOffIdx = kOffLse + HC * 4;  // [kNB][16] cleaned indices of step j % kNB
  static constexpr int kOffBar = (kOffIdx + kNB * kBT * 4 + 7) / 8 * 8;  // full[kNB], empty[kNB]
  static constexpr int kSmemBytes = kOffBar + 2 * kNB * 8;
  static_assert(kSmemBytes + 1024 <= 99 * 1024, "SM120 allows at most 99 KB of shared memory per block");
  static_assert(kNB >= kQ + 3, "per-step barriers must not alias within the steps in flight");
};

// DIAG: 0 = the kernel. Timing diagnostics, instantiated only by the benchmark (bench/sparse_mla, whose
// outputs are then meaningless): 1 = no gather (the producer arrives without copying: the consumers compute on
// whatever the ring holds), 2 = no compute (the consumers only wait for each step and release it).
template <int HC, int DIAG = 0>
__global__ void __launch_bounds__(RingCfg<HC>::kThreads, RingCfg<HC>::kMinBlocks)
    sparse_mla_ring_kernel(const KernelArgs a) {
  using C = RingCfg<HC>;
  using namespace mma;
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr int NB = C::kNB;
  constexpr int N = C::kRows;
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
  const int32_t* row_idx = a.indices + static_cast<int64_t>(t) * a.topk + first;

  const bool producer = warp >= C::kConsumerWarps;
  const int gi = producer ? 0 : warp / 4;
  const int wq = warp % 4;
  const int gtid = tid % C::kGroupThreads;

  uint32_t qf[C::kKSteps][C::kNTw][2];
  if (!producer)
    load_q_fragments(qf, a.q + (static_cast<int64_t>(t) * a.num_heads + hg * HC + gi * C::kHG) * kMlaQkDim,
                     wq * C::kKSteps, lane);

  int* s_idx = reinterpret_cast<int*>(smem + C::kOffIdx);
  const uint32_t bar_full = smem_addr(smem + C::kOffBar);
  const uint32_t bar_empty = bar_full + NB * 8;
  const uint32_t ring = smem_addr(smem);
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < NB; ++s) {
      // Two parts per step (rows < kD, rows >= kD), each completed by one arrival of the producer's lane 0
      // that carries its bytes (bulk), or by the 32 lanes' cp.async arrivals + lane 0 (sm_80).
      mbar_init(bar_full + s * 8, kBulk ? 2 : 2 * 33);
      mbar_init(bar_empty + s * 8, C::kConsumerWarps);
    }
  }
  __syncthreads();

  float* inv_l_s = reinterpret_cast<float*>(smem + C::kOffInvL);
  float* lse_s = reinterpret_cast<float*>(smem + C::kOffLse);
  float acc[4 * 2][C::kNTw][4];  // 8 m16 tiles = the warp's 128 output dims
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < C::kNTw; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
  const int sh = gtid / C::kTPH, ssub = gtid % C::kTPH;
  float m_run = kNegInf;
  float l_run = 0.f;

  if (producer) {
    const int r = lane & 15;
    auto load_idx = [&](int j) {
      const int e = j * C::kBT + r;
      const int v = j < nsteps && e < cnt ? __ldg(row_idx + e) : -1;
      return (v >= 0 && v < rc.num_slots) ? v : -1;
    };
    // Part 0 = rows r < kD of the step (their previous occupant: step j - kQ - 1), part 1 = rows r >= kD
    // (previous occupant: step j - kQ). Lanes outside the part do nothing but take part in the warp ops.
    auto issue_part = [&](int j, int part, int idx) {
      const bool mine = lane < 16 && (part == 0 ? r < C::kD : r >= C::kD);
      const bool valid = mine && idx >= 0 && DIAG != 1;
      const uint32_t bar = bar_full + (j % NB) * 8;
      const int row = (j * C::kBT + r) % N;
      uint8_t* dst = smem + row * C::kRowBytes;
      if constexpr (kBulk) {
        fence_proxy_async_smem();  // the rows' earlier generic accesses (zero fills) before the async writes
        if (mine) {
          s_idx[(j % NB) * C::kBT + r] = idx;
          if (!valid && DIAG != 1) {
            // Unused entry: zeros, so that V stays finite (P is 0 there, and 0 * NaN would poison O).
            const uint4 z = make_uint4(0u, 0u, 0u, 0u);
            for (int c = 0; c < kMlaBf16RecordBytes / 16; ++c) *reinterpret_cast<uint4*>(dst + c * 16) = z;
          }
        }
        const uint32_t nvalid = __popc(__ballot_sync(0xffffffffu, valid));
        __syncwarp();  // the lanes' index and zero stores before lane 0's arrival (which releases them)
        if (lane == 0) mbar_arrive_expect_tx(bar, nvalid * kMlaBf16RecordBytes);
        if (valid)
          bulk_copy_g2s(smem_addr(dst), rc.base + static_cast<int64_t>(idx) * kMlaBf16RecordBytes, kMlaBf16RecordBytes,
                        bar);
      } else {
        if (mine) s_idx[(j % NB) * C::kBT + r] = idx;
        __syncwarp();
        constexpr int kChunks = kMlaBf16RecordBytes / 16;
        for (int c = lane; c < C::kBT * kChunks; c += 32) {
          const int rr = c / kChunks, col = c - rr * kChunks;
          if (part == 0 ? rr >= C::kD : rr < C::kD) continue;
          const int ix = s_idx[(j % NB) * C::kBT + rr];
          const bool ok = ix >= 0;
          const uint8_t* src = ok ? rc.base + static_cast<int64_t>(ix) * kMlaBf16RecordBytes + col * 16 : rc.base;
          cp_async_16_l2_128(ring + ((j * C::kBT + rr) % N) * C::kRowBytes + col * 16, src, ok ? 16 : 0);
        }
        cp_async_mbar_arrive_noinc(bar);
        __syncwarp();
        if (lane == 0) mbar_arrive(bar);
      }
    };
    auto wait_released = [&](int k) {  // step k's rows are free again (every consumer warp is done with it)
      if (k >= 0) mbar_wait_parity(bar_empty + (k % NB) * 8, (k / NB) & 1);
    };
    int idx_next = load_idx(0);
    for (int j = 0; j < nsteps; ++j) {
      const int idx = idx_next;
      idx_next = load_idx(j + 1);
      wait_released(j - C::kQ - 1);
      issue_part(j, 0, idx);
      wait_released(j - C::kQ);
      issue_part(j, 1, idx);
    }
    cp_async_wait_all();
  } else {
    float* spart = reinterpret_cast<float*>(smem + C::kOffSpart) + gi * C::kSpartFloats;
    __nv_bfloat16* p_s = reinterpret_cast<__nv_bfloat16*>(smem + C::kOffP + gi * C::kPBytes);
    float* alpha_s = reinterpret_cast<float*>(smem + C::kOffAlpha) + gi * C::kHG;
    const uint32_t p_addr = smem_addr(p_s);
    const int bar_id = 1 + gi;
    const int d0 = wq * C::kDimsPerWarp;
    const int g_tok = (lane & 7) + ((lane >> 4) << 3);  // the token row this lane addresses in GEMM2's ldmatrix.trans
    for (int step = 0; step < nsteps; ++step) {
      mbar_wait_parity(bar_full + (step % NB) * 8, (step / NB) & 1);
      if constexpr (DIAG == 2) {
        __syncwarp();
        if (lane == 0) mbar_arrive(bar_empty + (step % NB) * 8);
        continue;
      }
      const int p0 = step * C::kBT;
      // GEMM1 (variant 5's qk_partial_step with a per-lane row address): lane l addresses token l % 16.
      {
        QkAcc<C::kNTw> q;
        q.zero();
        const uint32_t a_base = ring + ((p0 + (lane & 15)) % N) * C::kRowBytes + (lane >> 4) * 16 + wq * C::kKSteps * 32;
#pragma unroll
        for (int ks = 0; ks < C::kKSteps; ++ks) qk_kstep(q, qf, a_base, ks);
        qk_store<C::kHG>(q, spart, wq, 0, lane);
      }
      named_bar_sync(bar_id, C::kGroupThreads);
      softmax_step<C::kHG, C::kKQ, C::kTPH>(spart, s_idx + (step % NB) * C::kBT, a.scale_log2, sh, ssub, p_s,
                                            C::kPRowBytes / 2, alpha_s, m_run, l_run);
      named_bar_sync(bar_id, C::kGroupThreads);
      // GEMM2 (pv_step with a per-lane row address).
      pv_rescale(acc, alpha_s, lane);
      {
        uint32_t bfr[C::kNTw][2];
        pv_load_p(bfr, p_addr, C::kPRowBytes, lane);
        const uint32_t v_row = ring + ((p0 + g_tok) % N) * C::kRowBytes + (d0 + ((lane >> 3) & 1) * 8) * 2;
#pragma unroll
        for (int mt = 0; mt < 8; ++mt) {
          uint32_t af[4];
          ldmatrix_x4_trans(af, v_row + mt * 32);
#pragma unroll
          for (int nt = 0; nt < C::kNTw; ++nt) mma_bf16_16816(acc[mt][nt], af, bfr[nt][0], bfr[nt][1]);
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(bar_empty + (step % NB) * 8);
    }
    float l = l_run;
#pragma unroll
    for (int off = 1; off < C::kTPH; off <<= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
    if (ssub == 0) {
      inv_l_s[gi * C::kHG + sh] = l > 0.f ? 1.f / l : 0.f;
      lse_s[gi * C::kHG + sh] = l > 0.f ? m_run + log2f(l) : kNegInf;
    }
  }
  __syncthreads();  // every consumer is past its last GEMM2 and the producer's copies have landed
  float* stg = reinterpret_cast<float*>(smem);
  if (!producer) stage_outputs(acc, inv_l_s, stg, gi * C::kHG, wq * C::kDimsPerWarp, lane);
  __syncthreads();
  write_outputs<HC, C::kThreads>(a, stg, lse_s, t, hg, split, tid);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

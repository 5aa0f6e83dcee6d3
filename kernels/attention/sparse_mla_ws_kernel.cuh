// The warp-specialized sparse MLA kernel (round 3, kernel_variant 5): one CTA = one query token x HC heads x
// one split, as the other kernels, but without block-wide barriers in the main loop.
//
//   producer warps     (4 for 32 heads per CTA, one per SM sub-partition; 2 otherwise) gather 16-token steps.
//                      bf16 records on sm_90+: lanes 0..15 of the first producer warp copy one 1152-byte
//                      record each with cp.async.bulk into a ring of kRing bf16 tile slots; the slot's
//                      mbarrier "full" completes when the expected bytes have landed (and the zero-filled
//                      rows of unused entries are stored). bf16 on sm_80: 16-byte cp.async by all producer
//                      warps, completing through cp.async.mbarrier.arrive.noinc. FP8 records (cp.async, all
//                      producer warps): into a private ring of raw slots; the producers then dequantize
//                      each step into a 2-slot ring of bf16 tiles and arrive on its "full" barrier, so the
//                      dequantization runs beside the consumers' MMAs instead of in their chain (rounds
//                      1 / 2: a block-wide pass + barrier per step). A slot is refilled when its "empty"
//                      mbarrier says every consumer warp is done with it.
//   consumer groups    kGroups groups of 4 warps, each owning kHG (16, or 8 for H = 8) of the CTA's heads and
//                      running the whole per-step chain for them on its own named barrier (bar.sync id, 128):
//                        wait full -> GEMM1 k-split partials (warp w: k quarter w, all kHG heads) -> bar ->
//                        softmax (8 / 16 threads per head) -> bar -> rescale + GEMM2 (warp w: output dims
//                        128 w .. 128 w + 127 of the kHG heads) -> release the slot.
// Two 16-head groups share every gathered tile (one gather for 32 heads, as the 32-head CTAs of rounds 1
// and 2), but neither waits for the other: while one group runs its softmax or waits at its barrier, the
// other's MMAs keep the tensor cores busy, and neither the gather nor the FP8 dequantization sits on a
// consumer's critical path. Rounds 1 / 2 ran the same chain with 8 warps in lockstep through 3-4 block
// barriers per step.
// O^T accumulators stay in registers (a warp: 128 dims x kHG heads, 64 fp32 per thread for kHG = 16), Q^T
// fragments too (36 registers per thread). Shared memory <= 99 KB per block (static_assert); only mma.sync,
// ldmatrix, cp.async, mbarrier and named barriers (sm_80 / sm_90 / sm_120), and on sm_90+ the TMA bulk copy
// (cp.async.bulk without a tensor map or a cluster launch; SM120 has it).
// Measured (docs/PERFORMANCE.md, "Round 3"): the gather issue rate bounded every earlier version of this
// kernel (one cp.async producer warp: 2.2x slower than round 2; four: 1.1x faster; bulk copies: 1.3x).
#pragma once

#include "kernels/attention/sparse_mla_common.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

// bf16 records reach the warp-specialized kernels' rings (variants 5, 10, 11) by one cp.async.bulk per 1152-byte
// record where the target has the TMA bulk copy (sm_90+: Hopper and SM120), else by 16-byte cp.async (sm_80). Round
// 3 measured a warp's cp.async issue rate bounding the kernel, and the bulk copies 1.2-1.7x faster than 4 / 2
// cp.async producer warps. (Per compilation pass: the host pass sees false and compiles no kernel body.)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
inline constexpr bool kWsBulkCopies = true;
#else
inline constexpr bool kWsBulkCopies = false;
#endif

template <int HC, bool FP8>
struct WsCfg {
  static constexpr int kHG = HC >= 16 ? 16 : HC;  // heads per consumer group
  static constexpr int kGroups = HC / kHG;        // 2 for 32 heads per CTA, else 1
  static constexpr int kGroupThreads = 128;       // 4 warps
  static constexpr int kConsumerWarps = kGroups * 4;
  static constexpr int kProducerWarps = HC >= 32 ? 4 : 2;
  static constexpr int kProducerThreads = kProducerWarps * 32;
  static constexpr int kThreads = kConsumerWarps * 32 + kProducerThreads;
  // 16 / 8 heads: two CTAs per SM where shared memory allows (H100 / H200), as rounds 1 / 2 ran them.
  static constexpr int kMinBlocks = HC >= 32 ? 1 : 2;
  static constexpr int kBT = 16;                        // tokens per step (one m16 tile)
  static constexpr int kNTw = kHG / 8;                  // GEMM1 n8 head tiles per warp (all the group's heads)
  static constexpr int kKQ = 4;                         // GEMM1 k-split: one k quarter per warp of the group
  static constexpr int kKSteps = kMlaQkDim / 16 / kKQ;  // 9
  static constexpr int kDimsPerWarp = kMlaLatentDim / 4;
  static constexpr int kMT2 = kDimsPerWarp / 16;  // 8
  static constexpr int kNT2 = kHG / 8;
  static constexpr int kTPH = kGroupThreads / kHG;  // softmax threads per head: 8 or 16
  static_assert(kBT % kTPH == 0, "softmax thread grid");
  static constexpr int kRowBytes = kMlaBf16RecordBytes + 16;  // rows 4 banks apart: conflict-free ldmatrix
  static constexpr int kTileBytes = kBT * kRowBytes;          // 18688
  static constexpr int kRawRowBytes = kMlaFp8RecordBytes;
  static constexpr int kRawTileBytes = kBT * kRawRowBytes;    // 10496
  static constexpr int kRing = FP8 ? 2 : 4;                   // bf16 tile slots the consumers read
  static constexpr int kRawStages = FP8 ? 4 : 0;              // FP8: the producers' raw ring
  static constexpr int kOffRaw = kRing * kTileBytes;
  static constexpr int kStageAreaBytes = kOffRaw + kRawStages * kRawTileBytes;
  static_assert(HC * kStgStride * 4 <= kStageAreaBytes, "epilogue staging must fit in the stage area");
  static constexpr int kSpartFloats = kKQ * kHG * kBT;  // per group
  static constexpr int kPRowBytes = (kBT + 8) * 2;      // P[head][tok], 48 B rows: conflict-free ldmatrix
  static constexpr int kPBytes = kHG * kPRowBytes;      // per group
  static constexpr int kOffSpart = kStageAreaBytes;
  static constexpr int kOffP = kOffSpart + kGroups * kSpartFloats * 4;
  static constexpr int kOffAlpha = kOffP + kGroups * kPBytes;
  static constexpr int kOffInvL = kOffAlpha + HC * 4;
  static constexpr int kOffLse = kOffInvL + HC * 4;
  static constexpr int kOffIdx = (kOffLse + HC * 4 + 15) / 16 * 16;
  // full[kRing], empty[kRing] (the raw_full[kRawStages] of kernel_variant 6's FP8 bulk gather went with it)
  static constexpr int kOffBar = kOffIdx + kMaxSplitEntries * 4;
  static constexpr int kSmemBytes = kOffBar + 2 * kRing * 8;
  static_assert(kSmemBytes <= 99 * 1024, "SM120 allows at most 99 KB of shared memory per block");
  static_assert(kOffRaw % 16 == 0 && kOffSpart % 16 == 0 && kOffP % 16 == 0 && kOffBar % 8 == 0, "alignment");
};

// Where a warp-specialized CTA (variants 5 and 10) works and what its warps do: the grid place, the row's pool,
// the split's span of the row, and per warp: producer or consumer, its consumer group and its place in it.
struct WsRole {
  int hg, split, t;
  RowCache rc;
  SplitSpan span;
  const int32_t* row_idx;
  bool producer;
  int gi;  // consumer group (0 for producers)
  int wq;  // warp within the group: GEMM1 k quarter, GEMM2 dim quarter
};
template <class C, int HC>
__device__ __forceinline__ WsRole ws_role(const KernelArgs& a, int warp) {
  const CtaPlace place = cta_place<HC>(a);
  WsRole r;
  r.hg = place.hg, r.split = place.split, r.t = place.t;
  r.rc = row_cache(a, r.t);  // this row's pool (one of several in a batched launch)
  r.span = split_span<C::kBT>(a, r.t, r.split);
  r.row_idx = a.indices + static_cast<int64_t>(r.t) * a.topk;
  r.producer = warp >= C::kConsumerWarps;
  r.gi = r.producer ? 0 : warp / 4;
  r.wq = warp % 4;
  return r;
}

// How many producer warps issue a step's bulk copies (KernelArgs::ws_copy_warps, clamped to the kernel's).
template <class C>
__device__ __forceinline__ int ws_copy_warps_of(const KernelArgs& a) {
  return a.ws_copy_warps == 4 && C::kProducerWarps >= 4   ? 4
         : a.ws_copy_warps >= 2 && C::kProducerWarps >= 2 ? 2
                                                          : 1;
}

// Session 26 (diagnostic, racecheck only): GLM5RT_MLA_RELEASE_ALL_LANES=1 at build time makes every lane of a
// consumer warp of variants 5 and 10 arrive on the slot's "empty" barrier (32 arrivals per warp) instead of the warp's
// lane 0 after __syncwarp(), so that no ordering of the slot's reads rests on the warp barrier.
#ifndef GLM5RT_MLA_RELEASE_ALL_LANES
#define GLM5RT_MLA_RELEASE_ALL_LANES 0
#endif
inline constexpr int kEmptyArrivalsPerWarp = GLM5RT_MLA_RELEASE_ALL_LANES ? 32 : 1;
// A consumer warp is done reading ring slot `bar` (its "empty" mbarrier).
__device__ __forceinline__ void ws_release_slot(uint32_t bar, int lane) {
  if constexpr (kEmptyArrivalsPerWarp == 32) {
    mma::mbar_arrive(bar);
  } else {
    __syncwarp();
    if (lane == 0) mma::mbar_arrive(bar);
  }
}

// The ring's mbarriers of the warp-specialized kernels (variants 5 and 10), by thread 0 before the prologue's
// __syncthreads. kFullExtra: arrivals on each "full" barrier besides the producer threads' (sm_80 path only;
// variant 10's 16-head producer adds one per row for the slot's indices).
template <class C, bool kBulk, int kFullExtra = 0>
__device__ __forceinline__ void ws_init_ring(int tid, int copy_warps, uint32_t bar_full, uint32_t bar_empty) {
  using namespace mma;
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < C::kRing; ++s) {
      // Every producer thread arrives once per fill (bf16: when its copies land; FP8: after its dequantized
      // stores, so that each thread's arrive releases its own writes).
      // Bulk: the copying producer warps' lanes (each warp's lane 0 registers its expected bytes first).
      mbar_init(bar_full + s * 8, kBulk ? 32 * copy_warps : C::kProducerThreads + kFullExtra);
      mbar_init(bar_empty + s * 8, C::kConsumerWarps * kEmptyArrivalsPerWarp);  // one arrival per consumer warp
    }
  }
}

// The prologue of the warp-specialized kernels (variants 5 and 10), before their __syncthreads: the split's
// indices -> s_idx, cleaned (-1 = unused: past the length, negative, outside the pool), and the ring's
// mbarriers initialised. (Not stage_split_indices: its row_idx + (first + i) form moves variant 5's register
// allocation and schedule on sm_90; the entries loaded are the same.)
template <class C, bool kBulk>
__device__ __forceinline__ void ws_stage_and_init(int* s_idx, const int32_t* row_idx, const SplitSpan& span,
                                                  const RowCache& rc, int tid, int copy_warps, uint32_t bar_full,
                                                  uint32_t bar_empty) {
#pragma unroll 4
  for (int i = tid; i < span.nsteps * C::kBT; i += C::kThreads) {
    const int v = i < span.cnt ? __ldg(row_idx + span.first + i) : -1;
    s_idx[i] = (v >= 0 && v < rc.num_slots) ? v : -1;
  }
  ws_init_ring<C, kBulk>(tid, copy_warps, bar_full, bar_empty);
}

// One step's bulk copies by one producer warp (variants 5, 10 and 11): the lanes with `act` own the slot row at
// `row` and copy record `idx` into it, or zeros when idx < 0, so that V stays finite (P is 0 there, and 0 * NaN
// would poison O). The bytes of the warp's valid rows are registered first (before any lane's copy can land),
// every lane arrives after its own copy or zero stores (lane 0 used to arrive with the bytes before zero-filling
// its row, so the phase could complete before those stores): the slot's "full" barrier expects 32 arrivals per
// copying warp.
__device__ __forceinline__ void ws_copy_row(uint8_t* row, int idx, bool act, const uint8_t* base, uint32_t bar,
                                            int lane) {
  using namespace mma;
  const bool valid = idx >= 0;
  const uint32_t nvalid = __popc(__ballot_sync(0xffffffffu, act && valid));
  fence_proxy_async_smem();  // earlier zero-fill stores of this lane before the async-proxy writes
  if (lane == 0) mbar_expect_tx(bar, nvalid * kMlaBf16RecordBytes);
  __syncwarp();
  if (act) {
    if (valid) {
      bulk_copy_g2s(smem_addr(row), base + static_cast<int64_t>(idx) * kMlaBf16RecordBytes, kMlaBf16RecordBytes,
                    bar);
    } else {
      const uint4 z = make_uint4(0u, 0u, 0u, 0u);
      for (int c = 0; c < kMlaBf16RecordBytes / 16; ++c) *reinterpret_cast<uint4*>(row + c * 16) = z;
    }
  }
  mbar_arrive(bar);
}

// The producer warps' loop (variant 5 and variant 10 share it): gathers steps 0 .. nsteps - 1 of the split
// (indices in s_idx, cleaned) into the ring of C::kRing bf16 tile slots at the start of shared memory,
// signalling each slot's "full" mbarrier and waiting on its "empty" one before a refill. ptid = the thread's
// index among the producer threads. Returns when every copy it issued has landed or been waited for.
template <class C, bool FP8, bool kBulk>
__device__ __forceinline__ void ws_produce(uint8_t* smem, const int* s_idx, const RowCache& rc, int nsteps,
                                           int ptid, int lane, int copy_warps, uint32_t bar_full,
                                           uint32_t bar_empty) {
  using namespace mma;
  constexpr int NST = C::kRing;
  // Gather step `step` into the slot at dst0 (rows of dst_row bytes); unused entries are zero-filled: V
  // must stay finite (P is 0 there, and 0 * NaN would poison O).
  auto issue = [&](int step, uint32_t dst0) {
    constexpr int kTotal = C::kBT * kRecordChunks<FP8>;
    const int* sidx = s_idx + step * C::kBT;  // (as a pointer, not first = step * kBT: same cubin as before)
#pragma unroll 4
    for (int c = ptid; c < kTotal; c += C::kProducerThreads)
      gather_chunk<FP8, FP8 ? C::kRawRowBytes : C::kRowBytes, FP8 ? 0 : 128>(dst0, sidx, 0, rc.base, c);
  };
  if constexpr (kBulk) {
    if (ptid < 32 * copy_warps) {
      // Producer warp pw copies rows pw * rpw .. pw * rpw + rpw - 1 of each step (its lanes 0 .. rpw - 1).
      const int rpw = C::kBT / copy_warps;
      const bool act = lane < rpw;
      const int r = (ptid >> 5) * rpw + (act ? lane : 0);
      for (int step = 0; step < nsteps; ++step) {
        const int slot = step % NST, use = step / NST;
        if (use > 0) mbar_wait_parity(bar_empty + slot * 8, (use - 1) & 1);
        ws_copy_row(smem + slot * C::kTileBytes + r * C::kRowBytes, s_idx[step * C::kBT + r], act, rc.base,
                    bar_full + slot * 8, lane);
      }
    }
  } else if constexpr (!FP8) {
    for (int step = 0; step < nsteps; ++step) {
      const int slot = step % NST, use = step / NST;
      if (use > 0) mbar_wait_parity(bar_empty + slot * 8, (use - 1) & 1);
      issue(step, smem_addr(smem + slot * C::kTileBytes));
      cp_async_mbar_arrive_noinc(bar_full + slot * 8);
    }
  } else {
    // Raw ring of kRawStages slots (private to the producers: cp.async groups + a named barrier), then
    // dequantization into the consumers' 2-slot bf16 ring.
    constexpr int NR = C::kRawStages;
    constexpr int kProducerBar = 1 + C::kGroups;
    auto raw_slot = [&](int step) { return C::kOffRaw + (step % NR) * C::kRawTileBytes; };
#pragma unroll
    for (int s = 0; s < NR - 1; ++s) {
      if (s < nsteps) issue(s, smem_addr(smem + raw_slot(s)));
      cp_async_commit();
    }
    for (int step = 0; step < nsteps; ++step) {
      cp_async_wait_group<NR - 2>();                          // this thread's copies of `step` landed
      named_bar_sync(kProducerBar, C::kProducerThreads);      // everyone's; the raw slot of step-1 is free
      if (step + NR - 1 < nsteps) issue(step + NR - 1, smem_addr(smem + raw_slot(step + NR - 1)));
      cp_async_commit();
      const int slot = step % NST, use = step / NST;
      if (use > 0) mbar_wait_parity(bar_empty + slot * 8, (use - 1) & 1);
      const uint8_t* raw = smem + raw_slot(step);
      uint8_t* tile = smem + slot * C::kTileBytes;
#pragma unroll 3
      for (int c = ptid; c < C::kBT * 72; c += C::kProducerThreads) {
        dequant_tile_chunk<C::kRawRowBytes, C::kRowBytes>(raw, tile, c);
      }
      mbar_arrive(bar_full + slot * 8);
    }
  }
  cp_async_wait_all();  // nothing may land in the stage area after the loop (the epilogue reuses it)
}

// (kernel_variant 6, round 5's FP8 records gathered by bulk copies in this kernel, measured slower than
// variant 5 / 7 everywhere, was removed in session 4: git history before commit "remove kernel_variant 6".)
template <int HC, bool FP8>
__global__ void __launch_bounds__(WsCfg<HC, FP8>::kThreads, WsCfg<HC, FP8>::kMinBlocks)
    sparse_mla_ws_kernel(const KernelArgs a) {
  using C = WsCfg<HC, FP8>;
  using namespace mma;
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr int NST = C::kRing;
  // bf16 records by bulk copies (kWsBulkCopies); FP8 keeps cp.async (its producers are bound by the
  // dequantization).
  constexpr bool kBulk = !FP8 && kWsBulkCopies;
  extern __shared__ __align__(16) uint8_t smem[];

  wait_for_predecessor();  // before any global access (PDL)
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const WsRole role = ws_role<C, HC>(a, warp);
  const int hg = role.hg, split = role.split, t = role.t;
  const RowCache& rc = role.rc;
  const SplitSpan& span = role.span;
  const int nsteps = span.nsteps;
  const int32_t* row_idx = role.row_idx;
  const bool producer = role.producer;
  const int gi = role.gi, wq = role.wq;
  allow_dependent_launch();  // the combine kernel (PDL)
  const int gtid = tid % C::kGroupThreads;

  uint32_t qf[C::kKSteps][C::kNTw][2];
  if (!producer)
    load_q_fragments(qf, a.q + (static_cast<int64_t>(t) * a.num_heads + hg * HC + gi * C::kHG) * kMlaQkDim,
                     wq * C::kKSteps, lane);

  int* s_idx = reinterpret_cast<int*>(smem + C::kOffIdx);
  const uint32_t bar_full = smem_addr(smem + C::kOffBar);
  const uint32_t bar_empty = bar_full + NST * 8;
  const int copy_warps = ws_copy_warps_of<C>(a);
  ws_stage_and_init<C, kBulk>(s_idx, row_idx, span, rc, tid, copy_warps, bar_full, bar_empty);
  __syncthreads();

  float* inv_l_s = reinterpret_cast<float*>(smem + C::kOffInvL);
  float* lse_s = reinterpret_cast<float*>(smem + C::kOffLse);
  float acc[C::kMT2][C::kNT2][4];
  zero_acc(acc);
  const int sh = gtid / C::kTPH, ssub = gtid % C::kTPH;  // softmax role: head sh of the group
  float m_run = kNegInf;  // running max (base-2 scaled units) of head sh, identical on its kTPH threads
  float l_run = 0.f;      // this thread's share of head sh's running sum

  if (producer) {
    ws_produce<C, FP8, kBulk>(smem, s_idx, rc, nsteps, tid - C::kConsumerWarps * 32, lane, copy_warps, bar_full,
                              bar_empty);
  } else {
    float* spart = reinterpret_cast<float*>(smem + C::kOffSpart) + gi * C::kSpartFloats;
    __nv_bfloat16* p_s = reinterpret_cast<__nv_bfloat16*>(smem + C::kOffP + gi * C::kPBytes);
    float* alpha_s = reinterpret_cast<float*>(smem + C::kOffAlpha) + gi * C::kHG;
    const uint32_t p_addr = smem_addr(p_s);
    const int bar_id = 1 + gi;
    const int d0 = wq * C::kDimsPerWarp;
    auto tile_of = [&](int step) { return smem_addr(smem + (step % NST) * C::kTileBytes); };
    auto wait_full = [&](int step) { mbar_wait_parity(bar_full + (step % NST) * 8, (step / NST) & 1); };
    auto release = [&](int step) { ws_release_slot(bar_empty + (step % NST) * 8, lane); };
    auto softmax = [&](int step) {
      softmax_step<C::kHG, C::kKQ, C::kTPH>(spart, s_idx + step * C::kBT, a.scale_log2, sh, ssub, p_s,
                                            C::kPRowBytes / 2, alpha_s, m_run, l_run);
    };
    for (int step = 0; step < nsteps; ++step) {
      wait_full(step);
      qk_partial_step<C::kHG>(qf, tile_of(step), C::kRowBytes, wq, 0, lane, spart);
      named_bar_sync(bar_id, C::kGroupThreads);  // the group's partial scores visible
      softmax(step);
      named_bar_sync(bar_id, C::kGroupThreads);  // P^T and the rescale factors visible
      pv_step(acc, alpha_s, p_addr, C::kPRowBytes, tile_of(step), C::kRowBytes, d0, lane);
      release(step);
    }
    // Total softmax sum per head (over its kTPH threads). (Not finish_softmax_sums: called here it moves the
    // register allocation of this kernel on sm_90 or sm_120, depending on the form; the sums are the same.)
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

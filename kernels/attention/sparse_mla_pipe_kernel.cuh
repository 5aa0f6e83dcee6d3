// The pipelined sparse MLA kernel (round 2): one CTA = one query token x HC heads x one split, as the
// round-1 kernel (sparse_mla_kernel.cuh), but the gather runs as a ring of NST 16-token slots, so that NST-1
// slots (48 tokens for bf16 records, 80 for FP8) are in flight while one is computed; round 1 held one
// 32-token tile in flight (37 KB per SM), and its time per tile was the gather latency, not the compute.
//
// Per 16-token step i (slot i % NST):
//   wait for slot i; barrier A; issue the gather of step i + NST - 1 into the slot step i - 1 used
//          (L2 prefetch hint sized to the record: 128 B for bf16 records, none for FP8; round 1's 256 B
//          fetched 1280 bytes per 1152-byte record and up to 1024 per 656-byte one)
//   [FP8: dequantize the raw slot into the bf16 tile; barrier]
//   GEMM1, split over the head dimension k: warp (wh, kq) computes S^T[16 tok x 8*kNTw heads] over
//          9 of the 36 k-steps (K read from shared memory once per head half instead of once per 8 heads:
//          round 1 streamed 512 B of K per MMA); the 4 partial sums go to shared memory; barrier B
//   softmax: thread (head, sub) sums the partials of its tokens, reduces the tile max over the head's
//          threads with shuffles, writes P^T (bf16) and the rescale factor; barrier C
//   GEMM2  O^T[512 x HC] += V^T[512 x 16] P^T[16 x HC], each warp 512 / warps output dims, all HC heads.
// Same parameter struct, split plan, partial-output format and combine kernel as round 1.
// Measured on the H200 (docs/PERFORMANCE.md, "Round 2"): the deeper ring did not make it faster than
// round 1 in general (the bottleneck was not the bytes in flight); it wins at 8 heads per CTA in decode
// and, compiled for two CTAs per SM (variant 3), at 32 heads for T >= 64. The launcher picks per shape.
// Shared memory <= 99 KB per block (static_assert), only mma.sync / ldmatrix / cp.async: valid on sm_120.
#pragma once

#include "kernels/attention/sparse_mla_kernel.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

template <int HC, bool FP8>
struct PipeCfg {
  static constexpr int kWarps = HC >= 32 ? 8 : 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kBT = 16;                       // tokens per step (one m16 tile)
  static constexpr int kNTw = HC == 8 ? 1 : 2;         // GEMM1 n8 head tiles per warp
  static constexpr int kWH = HC / (8 * kNTw);          // GEMM1 warps along heads
  static constexpr int kKQ = kWarps / kWH;             // GEMM1 warps along k (the 576 dims)
  static_assert(kWH * kKQ == kWarps && (kMlaQkDim / 16) % kKQ == 0, "GEMM1 warp grid");
  static constexpr int kKSteps = kMlaQkDim / 16 / kKQ;  // k16 steps per GEMM1 warp (9)
  static constexpr int kDimsPerWarp = kMlaLatentDim / kWarps;
  static constexpr int kMT2 = kDimsPerWarp / 16;
  static constexpr int kNT2 = HC / 8;
  // Softmax: kTPH threads per head, kTokPT tokens each.
  static constexpr int kTPH = kThreads / HC;
  static constexpr int kTokPT = kBT / kTPH;
  static_assert(kTokPT >= 1 && kTokPT * kTPH == kBT && (kTPH == 8 || kTPH == 16), "softmax thread grid");
  static constexpr int kRowBytes = kMlaBf16RecordBytes + 16;  // rows 4 banks apart: conflict-free ldmatrix
  static constexpr int kTileBytes = kBT * kRowBytes;          // 18688
  static constexpr int kRawRowBytes = kMlaFp8RecordBytes;     // 656 B = 164 words: rows 4 banks apart too
  static constexpr int kRawTileBytes = kBT * kRawRowBytes;    // 10496
  static constexpr int kSlotBytes = FP8 ? kRawTileBytes : kTileBytes;
  static constexpr int kStages = FP8 ? 6 : 4;
  static constexpr int kOffDq = kStages * kSlotBytes;        // FP8: the dequantized bf16 tile
  static constexpr int kStageAreaBytes = kOffDq + (FP8 ? kTileBytes : 0);
  static_assert(HC * kStgStride * 4 <= kStageAreaBytes, "epilogue staging must fit in the stage area");
  static constexpr int kSpartBytes = kKQ * HC * kBT * 4;  // partial S [kq][head][tok] fp32
  static constexpr int kPRowBytes = (kBT + 8) * 2;        // P[head][tok], 48 B rows: conflict-free ldmatrix
  static constexpr int kOffSpart = kStageAreaBytes;
  static constexpr int kOffP = kOffSpart + kSpartBytes;
  static constexpr int kOffAlpha = kOffP + HC * kPRowBytes;
  static constexpr int kOffInvL = kOffAlpha + HC * 4;
  static constexpr int kOffLse = kOffInvL + HC * 4;
  static constexpr int kOffIdx = kOffLse + HC * 4;
  static constexpr int kSmemBytes = kOffIdx + kMaxSplitEntries * 4;
  static_assert(kSmemBytes <= 99 * 1024, "SM120 allows at most 99 KB of shared memory per block");
  static_assert(kOffDq % 16 == 0 && kOffSpart % 16 == 0 && kOffP % 16 == 0 && kOffIdx % 16 == 0, "alignment");
};

// MINB = CTAs per SM the register budget is cut for: 1 everywhere by default; 2 lets two 32-head CTAs
// (2 x 93 / 98 KB of shared memory) share an SM where an SM has more than 200 KB (H100 / H200: 227 KB), at
// the price of a few spilled registers (255 -> 128 per thread). SM120 (100 KB per SM) never fits two.
template <int HC, bool FP8, int MINB>
__global__ void __launch_bounds__(PipeCfg<HC, FP8>::kThreads, MINB) sparse_mla_pipe_kernel(const KernelArgs a) {
  using C = PipeCfg<HC, FP8>;
  using namespace mma;
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr int NST = C::kStages;
  extern __shared__ __align__(16) uint8_t smem[];

  wait_for_predecessor();  // before any global access (PDL)
  const CtaPlace place = cta_place<HC>(a);
  const int hg = place.hg, split = place.split, t = place.t;
  const RowCache rc = row_cache(a, t);  // this row's pool (one of several in a batched launch)
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  allow_dependent_launch();  // the combine kernel (PDL)

  const SplitSpan span = split_span<C::kBT>(a, t, split);
  const int nsteps = span.nsteps;
  const int32_t* row_idx = a.indices + static_cast<int64_t>(t) * a.topk;

  // GEMM1 role: warp = kq * kWH + wh.
  const int wh = warp % C::kWH, kq = warp / C::kWH;
  uint32_t qf[C::kKSteps][C::kNTw][2];
  load_q_fragments(qf, a.q + (static_cast<int64_t>(t) * a.num_heads + hg * HC + wh * C::kNTw * 8) * kMlaQkDim,
                   kq * C::kKSteps, lane);

  // The split's indices -> shared memory, cleaned.
  int* s_idx = reinterpret_cast<int*>(smem + C::kOffIdx);
  stage_split_indices<C::kThreads>(s_idx, row_idx, span, nsteps * C::kBT, rc.num_slots, tid);
  __syncthreads();

  // Gather step `step` into ring slot `slot`; unused entries are zero-filled (V must stay finite).
  auto issue = [&](int step, int slot) {
    const uint32_t dst0 = smem_addr(smem + slot * C::kSlotBytes);
    constexpr int kRow = FP8 ? C::kRawRowBytes : C::kRowBytes;
    gather_rows<FP8, C::kThreads, C::kBT, FP8 ? 0 : 128>(s_idx + step * C::kBT, rc.base, tid,
                                                          [&](int r, int col) { return dst0 + r * kRow + col * 16; });
  };

  // FP8: raw slot -> bf16 tile (value = e4m3 * scale of its 128-value block; rope copied).
  auto dequant = [&](int slot) {
    const uint8_t* raw = smem + slot * C::kSlotBytes;
    uint8_t* tile = smem + C::kOffDq;
    constexpr int kTotal = C::kBT * 72;
#pragma unroll
    for (int k = 0; k < (kTotal + C::kThreads - 1) / C::kThreads; ++k) {
      const int c = tid + k * C::kThreads;
      if (kTotal % C::kThreads != 0 && c >= kTotal) break;
      dequant_tile_chunk<C::kRawRowBytes, C::kRowBytes>(raw, tile, c);
    }
  };

  float* spart = reinterpret_cast<float*>(smem + C::kOffSpart);
  float* alpha_s = reinterpret_cast<float*>(smem + C::kOffAlpha);
  float* inv_l_s = reinterpret_cast<float*>(smem + C::kOffInvL);
  float* lse_s = reinterpret_cast<float*>(smem + C::kOffLse);
  __nv_bfloat16* p_s = reinterpret_cast<__nv_bfloat16*>(smem + C::kOffP);
  const uint32_t p_addr = smem_addr(p_s);

  // Softmax role: head sh, tokens ssub * kTokPT + j.
  const int sh = tid / C::kTPH, ssub = tid % C::kTPH;
  float m_run = kNegInf;  // running max (base-2 scaled units) of head sh, identical on its kTPH threads
  float l_run = 0.f;      // this thread's share of head sh's running sum

  float acc[C::kMT2][C::kNT2][4];
  zero_acc(acc);
  const int d0 = warp * C::kDimsPerWarp;

  ring_fill<NST>(issue, nsteps);
  int slot = 0;
  for (int it = 0; it < nsteps; ++it) {
    ring_next<NST>(issue, it, slot, nsteps);  // step it landed, barrier (A), step it + NST - 1 issued
    const uint8_t* tile;
    if constexpr (FP8) {
      dequant(slot);
      __syncthreads();
      tile = smem + C::kOffDq;
    } else {
      tile = smem + slot * C::kSlotBytes;
    }
    const uint32_t tile_addr = smem_addr(tile);

    qk_partial_step<HC>(qf, tile_addr, C::kRowBytes, kq, wh * C::kNTw * 8, lane, spart);
    __syncthreads();  // (B) partial scores visible

    softmax_step<HC, C::kKQ, C::kTPH>(spart, s_idx + it * C::kBT, a.scale_log2, sh, ssub, p_s, C::kPRowBytes / 2,
                                      alpha_s, m_run, l_run);
    __syncthreads();  // (C) P^T and the rescale factors visible

    pv_step(acc, alpha_s, p_addr, C::kPRowBytes, tile_addr, C::kRowBytes, d0, lane);
    slot = slot == NST - 1 ? 0 : slot + 1;
  }
  cp_async_wait_all();

  // Epilogue: total softmax sum per head (over its kTPH threads), normalise, stage O as fp32, write.
  finish_softmax_sums<C::kTPH>(l_run, m_run, ssub, sh, inv_l_s, lse_s);
  __syncthreads();  // also: every warp is past its last GEMM2, so the stage area can be reused
  float* stg = reinterpret_cast<float*>(smem);
  stage_outputs(acc, inv_l_s, stg, 0, d0, lane);
  __syncthreads();
  write_outputs<HC, C::kThreads>(a, stg, lse_s, t, hg, split, tid);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

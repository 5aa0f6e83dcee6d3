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

template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

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
  static constexpr int kStgStride = kMlaLatentDim + 4;  // floats per head in the epilogue staging
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

  const int groups = a.num_heads / HC;
  int bid = blockIdx.x;
  const int hg = bid % groups;
  bid /= groups;
  const int split = bid % a.nsplit;
  const int t = bid / a.nsplit;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Let the combine kernel (a programmatic dependent launch, when there are splits) be launched once every
  // CTA of this grid is resident; it waits for this grid's completion before reading anything.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif

  int len = a.topk;
  if (a.lengths != nullptr) len = min(max(__ldg(a.lengths + t), 0), a.topk);
  // The split covers entries [first, first + tiles_per_split * 32) of the row (the plan's 32-token tiles).
  const int first = split * a.tiles_per_split * kTileTokens;
  const int cnt = max(min(len, first + a.tiles_per_split * kTileTokens) - first, 0);
  const int nsteps = (cnt + C::kBT - 1) / C::kBT;
  const int32_t* row_idx = a.indices + static_cast<int64_t>(t) * a.topk;

  // GEMM1 role: warp = kq * kWH + wh.
  const int wh = warp % C::kWH, kq = warp / C::kWH;
  uint32_t qf[C::kKSteps][C::kNTw][2];
  {
#pragma unroll
    for (int nt = 0; nt < C::kNTw; ++nt) {
      const uint32_t* qrow = reinterpret_cast<const uint32_t*>(
          a.q + (static_cast<int64_t>(t) * a.num_heads + hg * HC + (wh * C::kNTw + nt) * 8 + g) * kMlaQkDim);
#pragma unroll
      for (int ks = 0; ks < C::kKSteps; ++ks) {
        const int k0 = (kq * C::kKSteps + ks) * 16;
        qf[ks][nt][0] = __ldg(qrow + (k0 + 2 * tq) / 2);
        qf[ks][nt][1] = __ldg(qrow + (k0 + 8 + 2 * tq) / 2);
      }
    }
  }

  // The split's indices -> shared memory, cleaned (-1 = unused: past the length, negative, outside the pool).
  int* s_idx = reinterpret_cast<int*>(smem + C::kOffIdx);
#pragma unroll 4
  for (int i = tid; i < nsteps * C::kBT; i += C::kThreads) {
    const int pos = first + i;
    const int v = i < cnt ? __ldg(row_idx + pos) : -1;
    s_idx[i] = (v >= 0 && v < a.num_slots) ? v : -1;
  }
  __syncthreads();

  // Gather step `step` into ring slot `slot`; unused entries are zero-filled (V must stay finite).
  auto issue = [&](int step, int slot) {
    constexpr int kChunks = FP8 ? kMlaFp8RecordBytes / 16 : kMlaBf16RecordBytes / 16;
    constexpr int kRecBytes = FP8 ? kMlaFp8RecordBytes : kMlaBf16RecordBytes;
    constexpr int kDstRow = FP8 ? C::kRawRowBytes : C::kRowBytes;
    const uint32_t dst0 = smem_addr(smem + slot * C::kSlotBytes);
    const int* sidx = s_idx + step * C::kBT;
    constexpr int kTotal = C::kBT * kChunks;
#pragma unroll
    for (int k = 0; k < (kTotal + C::kThreads - 1) / C::kThreads; ++k) {
      const int c = tid + k * C::kThreads;
      if (kTotal % C::kThreads != 0 && c >= kTotal) break;
      const int r = c / kChunks, col = c - r * kChunks;
      const int idx = sidx[r];
      const bool ok = idx >= 0;
      const uint8_t* src = ok ? a.cache + static_cast<int64_t>(idx) * kRecBytes + col * 16 : a.cache;
      if (a.l2_prefetch_256)  // uniform across the grid
        cp_async_16(dst0 + r * kDstRow + col * 16, src, ok ? 16 : 0);
      else if constexpr (FP8)
        cp_async_16_nohint(dst0 + r * kDstRow + col * 16, src, ok ? 16 : 0);
      else
        cp_async_16_l2_128(dst0 + r * kDstRow + col * 16, src, ok ? 16 : 0);
    }
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
      const int r = c / 72, col = c - r * 72;
      const uint8_t* rec = raw + r * C::kRawRowBytes;
      uint4 o;
      if (col < 64) {
        const uint2 v = *reinterpret_cast<const uint2*>(rec + col * 8);
        const float s = *reinterpret_cast<const float*>(rec + kMlaFp8ScaleOffset + (col >> 4) * 4);
        o.x = fp8x2_to_bf16x2(v.x, s);
        o.y = fp8x2_to_bf16x2(v.x >> 16, s);
        o.z = fp8x2_to_bf16x2(v.y, s);
        o.w = fp8x2_to_bf16x2(v.y >> 16, s);
      } else {
        o = *reinterpret_cast<const uint4*>(rec + kMlaFp8RopeOffset + (col - 64) * 16);
      }
      *reinterpret_cast<uint4*>(tile + r * C::kRowBytes + col * 16) = o;
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
  // Partial S layout [kq][head][16 tok]; the token is XORed with 8 on heads 2..3 mod 4 so that the GEMM1
  // stores (lanes: 4 even heads x 8 tokens) hit two bank groups instead of one.
  auto sp_off = [](int kqq, int h, int tok) { return (kqq * HC + h) * C::kBT + (tok ^ ((h & 2) << 2)); };
  float m_run = kNegInf;  // running max (base-2 scaled units) of head sh, identical on its kTPH threads
  float l_run = 0.f;      // this thread's share of head sh's running sum

  float acc[C::kMT2][C::kNT2][4];
#pragma unroll
  for (int i = 0; i < C::kMT2; ++i)
#pragma unroll
    for (int j = 0; j < C::kNT2; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
  const int d0 = warp * C::kDimsPerWarp;

#pragma unroll
  for (int s = 0; s < NST - 1; ++s) {
    if (s < nsteps) issue(s, s);
    cp_async_commit();
  }
  int slot = 0;
  for (int it = 0; it < nsteps; ++it) {
    cp_async_wait_group<NST - 2>();
    __syncthreads();  // (A) step it's slot visible to all; everyone is done with step it-1
    {
      const int nxt = it + NST - 1;
      if (nxt < nsteps) issue(nxt, slot == 0 ? NST - 1 : slot - 1);
      cp_async_commit();
    }
    const uint8_t* tile;
    if constexpr (FP8) {
      dequant(slot);
      __syncthreads();
      tile = smem + C::kOffDq;
    } else {
      tile = smem + slot * C::kSlotBytes;
    }
    const uint32_t tile_addr = smem_addr(tile);

    // GEMM1 partial: this warp's 9 k-steps over kNTw head tiles; two independent accumulator chains in
    // flight (two head tiles, or for one head tile two chains over alternating k-steps).
    {
      constexpr int kChains = C::kNTw == 1 ? 2 : 1;
      float s[kChains][C::kNTw][4];
#pragma unroll
      for (int c2 = 0; c2 < kChains; ++c2)
#pragma unroll
        for (int nt = 0; nt < C::kNTw; ++nt) s[c2][nt][0] = s[c2][nt][1] = s[c2][nt][2] = s[c2][nt][3] = 0.f;
      const uint32_t a_base = tile_addr + (lane & 15) * C::kRowBytes + (lane >> 4) * 16 + kq * C::kKSteps * 32;
#pragma unroll
      for (int ks = 0; ks < C::kKSteps; ++ks) {
        uint32_t af[4];
        ldmatrix_x4(af, a_base + ks * 32);
#pragma unroll
        for (int nt = 0; nt < C::kNTw; ++nt) mma_bf16_16816(s[ks % kChains][nt], af, qf[ks][nt][0], qf[ks][nt][1]);
      }
#pragma unroll
      for (int nt = 0; nt < C::kNTw; ++nt) {
        const int h = (wh * C::kNTw + nt) * 8 + 2 * tq;
        float v[4] = {s[0][nt][0], s[0][nt][1], s[0][nt][2], s[0][nt][3]};
        if constexpr (kChains == 2) {
          v[0] += s[1][nt][0];
          v[1] += s[1][nt][1];
          v[2] += s[1][nt][2];
          v[3] += s[1][nt][3];
        }
        spart[sp_off(kq, h, g)] = v[0];
        spart[sp_off(kq, h + 1, g)] = v[1];
        spart[sp_off(kq, h, g + 8)] = v[2];
        spart[sp_off(kq, h + 1, g + 8)] = v[3];
      }
    }
    __syncthreads();  // (B) partial scores visible

    {
      const int* sidx = s_idx + it * C::kBT;
      float sv[C::kTokPT];
      float mx = kNegInf;
#pragma unroll
      for (int j = 0; j < C::kTokPT; ++j) {
        const int tok = ssub * C::kTokPT + j;
        float v = 0.f;
#pragma unroll
        for (int k2 = 0; k2 < C::kKQ; ++k2) v += spart[sp_off(k2, sh, tok)];
        sv[j] = sidx[tok] >= 0 ? v * a.scale_log2 : kNegInf;
        mx = fmaxf(mx, sv[j]);
      }
#pragma unroll
      for (int off = 1; off < C::kTPH; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float mn = fmaxf(m_run, mx);
      // A head with nothing valid so far keeps max -inf; subtract 0 then so that exp2 gives 0, not NaN.
      const float mu = mn == kNegInf ? 0.f : mn;
      const float al = exp2f(m_run - mu);
      m_run = mn;
      float ps = 0.f;
#pragma unroll
      for (int j = 0; j < C::kTokPT; ++j) {
        const __nv_bfloat16 pb = __float2bfloat16(exp2f(sv[j] - mu));
        ps += __bfloat162float(pb);  // sum the rounded probabilities: exactly what GEMM2 multiplies V with
        p_s[sh * (C::kPRowBytes / 2) + ssub * C::kTokPT + j] = pb;
      }
      l_run = l_run * al + ps;
      if (ssub == 0) alpha_s[sh] = al;
    }
    __syncthreads();  // (C) P^T and the rescale factors visible

    {
      // Rescale O^T by the factors of the running-max update. Once the maxima settle most steps change no
      // head's max (alpha = exp2(0) = 1 exactly), so the warp skips the multiplies when none of its
      // heads moved.
      float al[C::kNT2][2];
      bool moved = false;
#pragma unroll
      for (int nt = 0; nt < C::kNT2; ++nt) {
        al[nt][0] = alpha_s[nt * 8 + 2 * tq];
        al[nt][1] = alpha_s[nt * 8 + 2 * tq + 1];
        moved |= al[nt][0] != 1.f || al[nt][1] != 1.f;
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
    }
    {
      uint32_t bfr[C::kNT2][2];
      if constexpr (C::kNT2 == 1) {
        uint32_t r2[2];
        ldmatrix_x2(r2, p_addr + (lane & 7) * C::kPRowBytes + ((lane >> 3) & 1) * 16);
        bfr[0][0] = r2[0];
        bfr[0][1] = r2[1];
      } else {
#pragma unroll
        for (int nt = 0; nt < C::kNT2; nt += 2) {
          uint32_t r4[4];
          ldmatrix_x4(r4, p_addr + (nt * 8 + (lane & 7) + ((lane >> 4) << 3)) * C::kPRowBytes +
                              ((lane >> 3) & 1) * 16);
          bfr[nt][0] = r4[0];
          bfr[nt][1] = r4[1];
          bfr[nt + 1][0] = r4[2];
          bfr[nt + 1][1] = r4[3];
        }
      }
#pragma unroll
      for (int mt = 0; mt < C::kMT2; ++mt) {
        uint32_t af[4];
        ldmatrix_x4_trans(af, tile_addr + ((lane & 7) + ((lane >> 4) << 3)) * C::kRowBytes +
                                  (d0 + mt * 16 + ((lane >> 3) & 1) * 8) * 2);
#pragma unroll
        for (int nt = 0; nt < C::kNT2; ++nt) mma_bf16_16816(acc[mt][nt], af, bfr[nt][0], bfr[nt][1]);
      }
    }
    slot = slot == NST - 1 ? 0 : slot + 1;
  }
  cp_async_wait_all();

  // Epilogue: total softmax sum per head (over its kTPH threads), normalise, stage O as fp32, write.
  {
    float l = l_run;
#pragma unroll
    for (int off = 1; off < C::kTPH; off <<= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
    if (ssub == 0) {
      inv_l_s[sh] = l > 0.f ? 1.f / l : 0.f;
      lse_s[sh] = l > 0.f ? m_run + log2f(l) : kNegInf;
    }
  }
  __syncthreads();  // also: every warp is past its last GEMM2, so the stage area can be reused
  float* stg = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int nt = 0; nt < C::kNT2; ++nt) {
    const int h = nt * 8 + 2 * tq;
    const float s0 = inv_l_s[h], s1 = inv_l_s[h + 1];
#pragma unroll
    for (int mt = 0; mt < C::kMT2; ++mt) {
      const int d = d0 + mt * 16 + g;
      stg[h * C::kStgStride + d] = acc[mt][nt][0] * s0;
      stg[(h + 1) * C::kStgStride + d] = acc[mt][nt][1] * s1;
      stg[h * C::kStgStride + d + 8] = acc[mt][nt][2] * s0;
      stg[(h + 1) * C::kStgStride + d + 8] = acc[mt][nt][3] * s1;
    }
  }
  __syncthreads();
  const int64_t row0 = static_cast<int64_t>(t) * a.num_heads + hg * HC;
  if (a.nsplit == 1) {
    for (int c = tid; c < HC * 64; c += C::kThreads) {
      const int h = c >> 6, d = (c & 63) * 8;
      const float4 x = *reinterpret_cast<const float4*>(stg + h * C::kStgStride + d);
      const float4 y = *reinterpret_cast<const float4*>(stg + h * C::kStgStride + d + 4);
      uint4 o;
      o.x = pack_bf16x2(x.x, x.y);
      o.y = pack_bf16x2(x.z, x.w);
      o.z = pack_bf16x2(y.x, y.y);
      o.w = pack_bf16x2(y.z, y.w);
      *reinterpret_cast<uint4*>(a.out + (row0 + h) * kMlaLatentDim + d) = o;
    }
    if (tid < HC) a.lse[row0 + tid] = lse_s[tid] * 0.69314718055994531f;  // -inf stays -inf
  } else {
    const int64_t prow0 = static_cast<int64_t>(split) * a.num_tokens * a.num_heads + row0;
    for (int c = tid; c < HC * 128; c += C::kThreads) {
      const int h = c >> 7, d = (c & 127) * 4;
      *reinterpret_cast<float4*>(a.part_o + (prow0 + h) * kMlaLatentDim + d) =
          *reinterpret_cast<const float4*>(stg + h * C::kStgStride + d);
    }
    if (tid < HC) a.part_lse[prow0 + tid] = lse_s[tid];
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail

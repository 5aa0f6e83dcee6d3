// The sparse MLA kernel: one CTA = one query token x one group of HC heads x one split of the top-k.
//
// Per 32-token tile of gathered records (each index = one 1152-byte row gather, cp.async, 2 stages):
//   GEMM1  S^T[32 tok x HC] = K[32 x 576] Q^T[576 x HC]   tokens on the MMA M side, heads on N (n8), so
//          H = 8 needs no padding. Q^T lives in registers as B fragments (8 heads per warp, 72 registers);
//          K comes from shared memory through ldmatrix.
//   online softmax per head over the tile (max reduced across the two token warps through shared memory),
//          P^T written to shared memory as bf16.
//   GEMM2  O^T[512 x HC] += V^T[512 x 32] P^T[32 x HC]    V = the first 512 values of the same records,
//          read with ldmatrix.trans; each warp owns 512 / warps output dims for all HC heads.
// FP8 records (656 bytes) are staged raw and dequantized to the same bf16 tile layout before GEMM1.
// Everything fits in <= 99 KB of shared memory (SM120's per-block limit), uses only mma.sync, ldmatrix
// and cp.async, and runs unchanged on sm_80 / sm_90 / sm_120.
#pragma once

#include "kernels/attention/sparse_mla_common.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

// Heads per CTA for a model head count: 8 and 16 natively, 32 for 32/64/128 (several head groups per token
// read the same rows one after another, so the second read is an L2 hit).
constexpr int heads_per_cta(int num_heads) { return num_heads >= 32 ? 32 : num_heads; }

template <int HC, bool FP8>
struct Cfg {
  static constexpr int kWarps = HC >= 32 ? 8 : 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kBT = kTileTokens;
  static constexpr int kWT = kBT / 16;     // GEMM1 warps along tokens (16 tokens each)
  static constexpr int kWH = HC / 8;       // GEMM1 warps along heads (8 heads each)
  static constexpr int kG1Warps = kWT * kWH;
  static_assert(kG1Warps <= kWarps, "GEMM1 needs more warps than the CTA has");
  static constexpr int kDimsPerWarp = kMlaLatentDim / kWarps;  // GEMM2 M slice per warp
  static constexpr int kMT2 = kDimsPerWarp / 16;
  static constexpr int kNT2 = HC / 8;
  static constexpr int kKSteps1 = kMlaQkDim / 16;  // 36
  // 1152 + 16: consecutive rows start 4 banks apart, so 8-row ldmatrix phases are conflict-free.
  static constexpr int kRowBytes = kMlaBf16RecordBytes + 16;
  static constexpr int kTileBytes = kBT * kRowBytes;
  static constexpr int kRawRowBytes = kMlaFp8RecordBytes;  // 656 B = 164 words: rows 4 banks apart too
  static constexpr int kRawTileBytes = kBT * kRawRowBytes;
  // bf16: two tile stages. FP8: two raw stages + one dequantized bf16 tile.
  static constexpr int kStageAreaBytes = FP8 ? 2 * kRawTileBytes + kTileBytes : 2 * kTileBytes;
  static constexpr int kPRowBytes = (kBT + 8) * 2;  // P^T stored as P[head][tok], 80 B rows: conflict-free
  static constexpr int kPBytes = HC * kPRowBytes;
  static constexpr int kEpilogueBytes = HC * kStgStride * 4;
  static_assert(kEpilogueBytes <= kStageAreaBytes, "epilogue staging must fit in the stage area");
  static constexpr int kOffP = kStageAreaBytes;
  static constexpr int kOffRedMax = kOffP + kPBytes;
  static constexpr int kOffRedSum = kOffRedMax + kWT * HC * 4;
  static constexpr int kOffAlpha = kOffRedSum + kWT * HC * 4;
  static constexpr int kOffMFinal = kOffAlpha + HC * 4;
  static constexpr int kOffInvL = kOffMFinal + HC * 4;
  static constexpr int kOffLse = kOffInvL + HC * 4;
  static constexpr int kOffIdx = kOffLse + HC * 4;
  static constexpr int kSmemBytes = kOffIdx + kMaxSplitEntries * 4;
  static_assert(kSmemBytes <= 99 * 1024, "SM120 allows at most 99 KB of shared memory per block");
  static_assert(kOffP % 16 == 0 && kTileBytes % 16 == 0 && kRawTileBytes % 16 == 0, "16-byte alignment");
};

template <int HC, bool FP8>
__global__ void __launch_bounds__(Cfg<HC, FP8>::kThreads, 1) sparse_mla_kernel(const KernelArgs a) {
  using C = Cfg<HC, FP8>;
  using namespace mma;
  constexpr float kNegInf = -__builtin_huge_valf();
  extern __shared__ __align__(16) uint8_t smem[];

  wait_for_predecessor();  // before any global access (PDL)
  const CtaPlace place = cta_place<HC>(a);
  const int hg = place.hg, split = place.split, t = place.t;
  const RowCache rc = row_cache(a, t);  // this row's pool (one of several in a batched launch)
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;

  int len = a.topk;
  if (a.lengths != nullptr) len = min(max(__ldg(a.lengths + t), 0), a.topk);
  const int ntiles = (len + C::kBT - 1) / C::kBT;
  const int tile_begin = split * a.tiles_per_split;
  const int n = max(min(ntiles, tile_begin + a.tiles_per_split) - tile_begin, 0);
  const int32_t* row_idx = a.indices + static_cast<int64_t>(t) * a.topk;

  // GEMM1 role: warps [0, kG1Warps) own 8 heads x 16 tokens each.
  const bool g1 = warp < C::kG1Warps;
  const int wh = warp % C::kWH, wt = warp / C::kWH;
  const int h0 = wh * 8 + 2 * tq;  // this lane's first head (of two) within the group
  const int tok0 = wt * 16 + g;    // this lane's first token (of two, +8) within the tile

  uint32_t qf[C::kKSteps1][2];
  if (g1) {
    const uint32_t* qrow = reinterpret_cast<const uint32_t*>(
        a.q + (static_cast<int64_t>(t) * a.num_heads + hg * HC + wh * 8 + g) * kMlaQkDim);
#pragma unroll
    for (int ks = 0; ks < C::kKSteps1; ++ks) {
      qf[ks][0] = __ldg(qrow + (ks * 16 + 2 * tq) / 2);
      qf[ks][1] = __ldg(qrow + (ks * 16 + 8 + 2 * tq) / 2);
    }
  }

  // The split's indices -> shared memory, cleaned: -1 for unused entries, entries past the row's length and
  // slots outside the pool. (Issued after the Q loads, so both are in flight together.)
  int* s_idx = reinterpret_cast<int*>(smem + C::kOffIdx);
  {
    const int first = tile_begin * C::kBT;
#pragma unroll 4
    for (int i = tid; i < n * C::kBT; i += C::kThreads) {
      const int pos = first + i;
      const int v = pos < len ? __ldg(row_idx + pos) : -1;
      s_idx[i] = (v >= 0 && v < rc.num_slots) ? v : -1;
    }
  }
  __syncthreads();

  // Gathers local tile `tile` of the split: row r is the record of slot s_idx[tile * 32 + r]; unused entries
  // are zero-filled so that V stays finite (P is 0 there, and 0 * NaN would poison O).
  auto issue = [&](int tile, int stage) {
    const int base = tile * C::kBT;
    const uint32_t dst0 = smem_addr(smem + stage * (FP8 ? C::kRawTileBytes : C::kTileBytes));
    constexpr int kRow = FP8 ? C::kRawRowBytes : C::kRowBytes;
    gather_rows<FP8, C::kThreads, C::kBT, 256>(s_idx + base, rc.base, tid,
                                               [&](int r, int col) { return dst0 + r * kRow + col * 16; });
  };

  // FP8 only: raw stage -> bf16 tile (value = e4m3 * scale of its 128-value block; rope copied).
  auto dequant = [&](int stage) {
    const uint8_t* raw = smem + stage * C::kRawTileBytes;
    uint8_t* tile = smem + 2 * C::kRawTileBytes;
    for (int c = tid; c < C::kBT * 72; c += C::kThreads) {
      dequant_tile_chunk<C::kRawRowBytes, C::kRowBytes>(raw, tile, c);
    }
  };

  float* red_max = reinterpret_cast<float*>(smem + C::kOffRedMax);
  float* red_sum = reinterpret_cast<float*>(smem + C::kOffRedSum);
  float* alpha_s = reinterpret_cast<float*>(smem + C::kOffAlpha);
  float* m_final = reinterpret_cast<float*>(smem + C::kOffMFinal);
  float* inv_l_s = reinterpret_cast<float*>(smem + C::kOffInvL);
  float* lse_s = reinterpret_cast<float*>(smem + C::kOffLse);
  __nv_bfloat16* p_s = reinterpret_cast<__nv_bfloat16*>(smem + C::kOffP);
  const uint32_t p_addr = smem_addr(p_s);

  float m_run[2] = {kNegInf, kNegInf};  // running max (base-2 scaled units) of heads h0, h0+1
  float l_run[2] = {0.f, 0.f};          // this lane's share of the running sums
  float acc[C::kMT2][C::kNT2][4];
  zero_acc(acc);
  const int d0 = warp * C::kDimsPerWarp;

  if (n > 0) issue(0, 0);
  cp_async_commit();
  for (int it = 0; it < n; ++it) {
    cp_async_wait_all();
    __syncthreads();  // tile `it` visible to all; everyone is done with tile it-1 and its stage
    if (it + 1 < n) issue(it + 1, (it + 1) & 1);
    cp_async_commit();
    const uint8_t* tile;
    if constexpr (FP8) {
      dequant(it & 1);
      __syncthreads();
      tile = smem + 2 * C::kRawTileBytes;
    } else {
      tile = smem + (it & 1) * C::kTileBytes;
    }
    const uint32_t tile_addr = smem_addr(tile);

    float c[4];
    if (g1) {
      const bool v0 = s_idx[it * C::kBT + tok0] >= 0, v1 = s_idx[it * C::kBT + tok0 + 8] >= 0;
      // Four independent accumulator chains keep several MMAs in flight per warp.
      float s[4][4];
#pragma unroll
      for (int i = 0; i < 4; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
      const uint32_t a_base = tile_addr + (wt * 16 + (lane & 15)) * C::kRowBytes + (lane >> 4) * 16;
#pragma unroll
      for (int ks = 0; ks < C::kKSteps1; ++ks) {
        uint32_t af[4];
        ldmatrix_x4(af, a_base + ks * 32);
        mma_bf16_16816(s[ks & 3], af, qf[ks][0], qf[ks][1]);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) c[i] = (s[0][i] + s[1][i]) + (s[2][i] + s[3][i]);
      float mx0, mx1;
      mask_scores_head_max(c, v0, v1, a.scale_log2, mx0, mx1);
      if (g == 0) {
        red_max[wt * HC + h0] = mx0;
        red_max[wt * HC + h0 + 1] = mx1;
      }
    }
    __syncthreads();  // tile maxima of both token warps visible
    if (g1) {
      float tm0 = kNegInf, tm1 = kNegInf;
#pragma unroll
      for (int w2 = 0; w2 < C::kWT; ++w2) {
        tm0 = fmaxf(tm0, red_max[w2 * HC + h0]);
        tm1 = fmaxf(tm1, red_max[w2 * HC + h0 + 1]);
      }
      const float mn0 = fmaxf(m_run[0], tm0), mn1 = fmaxf(m_run[1], tm1);
      // A head with nothing valid so far keeps max -inf; subtract 0 then so that exp2 gives 0, not NaN.
      const float mu0 = mn0 == kNegInf ? 0.f : mn0, mu1 = mn1 == kNegInf ? 0.f : mn1;
      const float al0 = exp2f(m_run[0] - mu0), al1 = exp2f(m_run[1] - mu1);
      m_run[0] = mn0;
      m_run[1] = mn1;
      const __nv_bfloat16 p0 = __float2bfloat16(exp2f(c[0] - mu0));
      const __nv_bfloat16 p1 = __float2bfloat16(exp2f(c[1] - mu1));
      const __nv_bfloat16 p2 = __float2bfloat16(exp2f(c[2] - mu0));
      const __nv_bfloat16 p3 = __float2bfloat16(exp2f(c[3] - mu1));
      // Sum the rounded probabilities: exactly what GEMM2 multiplies V with.
      l_run[0] = l_run[0] * al0 + (__bfloat162float(p0) + __bfloat162float(p2));
      l_run[1] = l_run[1] * al1 + (__bfloat162float(p1) + __bfloat162float(p3));
      constexpr int kPr = C::kPRowBytes / 2;
      p_s[h0 * kPr + tok0] = p0;
      p_s[(h0 + 1) * kPr + tok0] = p1;
      p_s[h0 * kPr + tok0 + 8] = p2;
      p_s[(h0 + 1) * kPr + tok0 + 8] = p3;
      if (wt == 0 && g == 0) {
        alpha_s[h0] = al0;
        alpha_s[h0 + 1] = al1;
      }
    }
    __syncthreads();  // P^T and the rescale factors visible

#pragma unroll
    for (int nt = 0; nt < C::kNT2; ++nt) {
      const float a0 = alpha_s[nt * 8 + 2 * tq], a1 = alpha_s[nt * 8 + 2 * tq + 1];
#pragma unroll
      for (int mt = 0; mt < C::kMT2; ++mt) {
        acc[mt][nt][0] *= a0;
        acc[mt][nt][1] *= a1;
        acc[mt][nt][2] *= a0;
        acc[mt][nt][3] *= a1;
      }
    }
#pragma unroll
    for (int kk = 0; kk < C::kBT / 16; ++kk) {
      uint32_t bfr[C::kNT2][2];
      if constexpr (C::kNT2 == 1) {
        uint32_t r2[2];
        ldmatrix_x2(r2, p_addr + (lane & 7) * C::kPRowBytes + (kk * 16 + ((lane >> 3) & 1) * 8) * 2);
        bfr[0][0] = r2[0];
        bfr[0][1] = r2[1];
      } else {
#pragma unroll
        for (int nt = 0; nt < C::kNT2; nt += 2) {
          uint32_t r4[4];
          ldmatrix_x4(r4, p_addr + (nt * 8 + (lane & 7) + ((lane >> 4) << 3)) * C::kPRowBytes +
                              (kk * 16 + ((lane >> 3) & 1) * 8) * 2);
          bfr[nt][0] = r4[0];
          bfr[nt][1] = r4[1];
          bfr[nt + 1][0] = r4[2];
          bfr[nt + 1][1] = r4[3];
        }
      }
#pragma unroll
      for (int mt = 0; mt < C::kMT2; ++mt) {
        uint32_t af[4];
        ldmatrix_x4_trans(af, tile_addr + (kk * 16 + (lane & 7) + ((lane >> 4) << 3)) * C::kRowBytes +
                                  (d0 + mt * 16 + ((lane >> 3) & 1) * 8) * 2);
#pragma unroll
        for (int nt = 0; nt < C::kNT2; ++nt) mma_bf16_16816(acc[mt][nt], af, bfr[nt][0], bfr[nt][1]);
      }
    }
  }
  cp_async_wait_all();

  // Epilogue: total softmax sums, normalise, stage O as fp32 [head][dim], write coalesced.
  if (g1) {
    float l0 = l_run[0], l1 = l_run[1];
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) {
      l0 += __shfl_xor_sync(0xffffffffu, l0, off);
      l1 += __shfl_xor_sync(0xffffffffu, l1, off);
    }
    if (g == 0) {
      red_sum[wt * HC + h0] = l0;
      red_sum[wt * HC + h0 + 1] = l1;
      if (wt == 0) {
        m_final[h0] = m_run[0];
        m_final[h0 + 1] = m_run[1];
      }
    }
  }
  __syncthreads();  // also: every warp is past its last GEMM2, so the stage area can be reused
  if (tid < HC) {
    float l = 0.f;
#pragma unroll
    for (int w2 = 0; w2 < C::kWT; ++w2) l += red_sum[w2 * HC + tid];
    inv_l_s[tid] = l > 0.f ? 1.f / l : 0.f;
    lse_s[tid] = l > 0.f ? m_final[tid] + log2f(l) : kNegInf;
  }
  __syncthreads();
  float* stg = reinterpret_cast<float*>(smem);
  stage_outputs(acc, inv_l_s, stg, 0, d0, lane);
  __syncthreads();
  write_outputs<HC, C::kThreads>(a, stg, lse_s, t, hg, split, tid);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

// Prefill-shaped FP8 GEMM (many rows per group): tensor-core bound. BMx128 output tiles, K blocks of 128
// (= one scale block, so the scales are applied once per stage to f32 partials), a 3-stage cp.async
// pipeline into XOR-swizzled shared memory, ldmatrix into mma.sync m16n8k32 e4m3 operands. 8 warps as
// 2 (M) x 4 (N). Portable to SM120: no wgmma, shared memory under 99 KB.
#pragma once

#include "kernels/gemm/fp8_common.cuh"
#include "kernels/gemm/fp8_gemm.h"
#include "kernels/gemm/launch.cuh"

namespace glm5rt::kernels::detail {

constexpr int kPfBN = 128, kPfBK = kFp8Block, kPfThreads = 256;
constexpr int kPfBTileBytes = kPfBN * kPfBK;
// Two shapes: BM = 128 rows (3 stages, 1 block per SM, 64x32 per warp) and BM = 64 rows (4 stages,
// 2 blocks per SM on Hopper, 32x32 per warp; less padding when groups hold ~100 rows).
template <int BM>
struct PfShape {
  static constexpr int kStages = BM == 128 ? 3 : 4;
  static constexpr int kMI = BM / 32;            // m16 tiles per warp (warps are 2 x 4 over M x N)
  static constexpr int kATileBytes = BM * kPfBK;
  static constexpr int kStageBytes = kATileBytes + kPfBTileBytes + BM * 4;  // A, B, f32 scale per A row
  static constexpr int kSmemBytes = kStages * kStageBytes;
  static constexpr int kAChunks = BM * 8 / kPfThreads;  // 16-byte A chunks per thread per stage
  static_assert(kSmemBytes <= 99 * 1024, "SM120 allows at most 99 KB of shared memory per block");
  static_assert(BM == 64 || BM == 128, "instantiated shapes");
};

// Byte offset of 16-byte chunk `ch` (0..7) of tile row `r`: rows are 128 bytes; XOR with r%8 spreads the
// 8 rows an ldmatrix phase reads over all banks.
__device__ __forceinline__ uint32_t swz(int r, int ch) { return r * 128 + ((ch ^ (r & 7)) << 4); }

// F16: instead of the FP8 mma, convert each e4m3 fragment to f16 in registers (exact) and issue two
// f16 m16n8k16 mmas. Meant for sm_90, which has no native FP8 mma.sync (the compiler's own expansion
// converts per mma, i.e. each A fragment 4 times); on sm_89 / sm_120 the native FP8 mma is the path.
template <int BM, bool F16>
__global__ void __launch_bounds__(kPfThreads, BM == 64 ? 2 : 1) fp8_gemm_prefill_kernel(const Fp8GemmParams p) {
#if GLM5RT_HAS_FP8_MMA
  pdl_wait_and_release();
  using S = PfShape<BM>;
  constexpr int kPfStages = S::kStages, kPfStageBytes = S::kStageBytes, kPfBM = BM, MI = S::kMI;
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  // Which group and which 128-row tile of it.
  int g = 0, row_begin = 0, rows = p.max_rows, m_tile = blockIdx.y;
  if (p.group_offsets) {
    const int t = blockIdx.y;
    if (t >= p.tile_prefix[p.num_groups]) return;
    int lo = 0, hi = p.num_groups - 1;  // largest g with tile_prefix[g] <= t (skips empty groups)
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (p.tile_prefix[mid] <= t) lo = mid; else hi = mid - 1;
    }
    g = lo;
    m_tile = t - p.tile_prefix[g];
    row_begin = p.group_offsets[g];
    rows = p.group_offsets[g + 1] - row_begin;
  }
  const int m0 = m_tile * kPfBM;
  if (m0 >= rows) return;
  const int tile_rows = min(kPfBM, rows - m0);

  const int n0 = blockIdx.x * kPfBN;
  const int part = n0 / p.part_rows;
  const int n_in_part = n0 - part * p.part_rows;
  const int part_valid_rows = min(p.part_rows, p.n - part * p.part_rows);
  const uint8_t* __restrict__ W = p.w[g * p.num_parts + part];
  const float* __restrict__ WS = p.w_scale[g * p.num_parts + part];
  const int kblocks = p.k / kPfBK;
  const float* ws_row = WS + static_cast<size_t>(n_in_part / kFp8Block) * kblocks;

  // Each thread copies 4 A chunks and 4 B chunks of 16 bytes per stage: rows tid/8 + 32i, chunk tid%8.
  const int ld_ch = tid % 8;
  const uint8_t* a_src[S::kAChunks];
  const uint8_t* b_src[4];
  int a_bytes[S::kAChunks], b_bytes[4];
#pragma unroll
  for (int i = 0; i < S::kAChunks; ++i) {
    const int r = tid / 8 + 32 * i;
    const bool a_ok = r < tile_rows;
    const int grow = row_begin + m0 + (a_ok ? r : 0);
    const int src = p.a_row_map ? p.a_row_map[grow] : grow;
    a_src[i] = p.a + static_cast<size_t>(src) * p.lda + ld_ch * 16;
    a_bytes[i] = a_ok ? 16 : 0;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = tid / 8 + 32 * i;
    const bool b_ok = n_in_part + r < part_valid_rows;
    b_src[i] = W + static_cast<size_t>(n_in_part + (b_ok ? r : 0)) * p.k + ld_ch * 16;
    b_bytes[i] = b_ok ? 16 : 0;
  }
  const float* s_src = nullptr;  // thread tid < 128 copies the scale of A row tid
  int s_bytes = 0;
  if (tid < kPfBM) {
    const bool ok = tid < tile_rows;
    const int grow = row_begin + m0 + (ok ? tid : 0);
    const int src = p.a_row_map ? p.a_row_map[grow] : grow;
    s_src = p.a_scale + static_cast<size_t>(src) * p.ld_scale;
    s_bytes = ok ? 4 : 0;
  }
  const uint32_t smem_base = smem_u32(smem);
  auto stage_a = [&](int s) { return smem_base + s * kPfStageBytes; };
  auto stage_b = [&](int s) { return smem_base + s * kPfStageBytes + S::kATileBytes; };
  auto stage_s = [&](int s) { return smem_base + s * kPfStageBytes + S::kATileBytes + kPfBTileBytes; };

  auto load_stage = [&](int s, int kb) {
    const size_t koff = static_cast<size_t>(kb) * kPfBK;
#pragma unroll
    for (int i = 0; i < S::kAChunks; ++i)
      cp_async_16(stage_a(s) + swz(tid / 8 + 32 * i, ld_ch), a_src[i] + koff, a_bytes[i]);
#pragma unroll
    for (int i = 0; i < 4; ++i) cp_async_16(stage_b(s) + swz(tid / 8 + 32 * i, ld_ch), b_src[i] + koff, b_bytes[i]);
    if (tid < kPfBM) cp_async_4(stage_s(s) + tid * 4, s_src + kb, s_bytes);
  };

  const int wm = warp / 4, wn = warp % 4;  // warp tile: rows wm*BM/2 .. +BM/2, cols wn*32 .. +32
  constexpr int WM = BM / 2;
  float acc[MI][4][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < kPfStages - 1; ++s) {
    if (s < kblocks) load_stage(s, s);
    cp_async_commit();
  }

  for (int kb = 0; kb < kblocks; ++kb) {
    cp_async_wait<kPfStages - 2>();
    __syncthreads();  // stage kb is visible to all; stage kb-1 is no longer read by anyone
    {
      const int nk = kb + kPfStages - 1;
      if (nk < kblocks) load_stage(nk % kPfStages, nk);
      cp_async_commit();
    }
    const int s = kb % kPfStages;
    const float ws = __ldg(ws_row + kb);
    float part_acc[MI][4][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) part_acc[i][j][e] = 0.f;

#pragma unroll
    for (int ks = 0; ks < kPfBK / 32; ++ks) {
      uint32_t a[MI][4], b[4][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const int r = wm * WM + mi * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        const int ch = ks * 2 + (lane >> 4);
        ldmatrix_x4(stage_a(s) + swz(r, ch), a[mi][0], a[mi][1], a[mi][2], a[mi][3]);
      }
#pragma unroll
      for (int nj = 0; nj < 2; ++nj) {
        const int r = wn * 32 + nj * 16 + (lane & 7) + (lane >> 4) * 8;
        const int ch = ks * 2 + ((lane >> 3) & 1);
        ldmatrix_x4(stage_b(s) + swz(r, ch), b[2 * nj][0], b[2 * nj][1], b[2 * nj + 1][0],
                    b[2 * nj + 1][1]);
      }
      if constexpr (F16) {
        // Half h of the k32 step: fp8 registers a[.][2h], a[.][2h+1] (rows g, g+8) and b[.][h]. Their
        // bytes 0,1 act as f16 "k 2c, 2c+1" and bytes 2,3 as "k 8+2c, 9+2c"; A and B agree, so the
        // sum over k is unchanged.
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t bf[4][2];
#pragma unroll
          for (int ni = 0; ni < 4; ++ni) {
            bf[ni][0] = e4m3x2_to_f16x2(static_cast<uint16_t>(b[ni][h]));
            bf[ni][1] = e4m3x2_to_f16x2(static_cast<uint16_t>(b[ni][h] >> 16));
          }
#pragma unroll
          for (int mi = 0; mi < MI; ++mi) {
            const uint32_t lo = a[mi][2 * h], hi = a[mi][2 * h + 1];
            const uint32_t f0 = e4m3x2_to_f16x2(static_cast<uint16_t>(lo));
            const uint32_t f1 = e4m3x2_to_f16x2(static_cast<uint16_t>(hi));
            const uint32_t f2 = e4m3x2_to_f16x2(static_cast<uint16_t>(lo >> 16));
            const uint32_t f3 = e4m3x2_to_f16x2(static_cast<uint16_t>(hi >> 16));
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) mma_f16_16816(part_acc[mi][ni], f0, f1, f2, f3, bf[ni][0], bf[ni][1]);
          }
        }
      } else {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < 4; ++ni)
            mma_e4m3_16832(part_acc[mi][ni], a[mi][0], a[mi][1], a[mi][2], a[mi][3], b[ni][0], b[ni][1]);
      }
    }
    // Scale promotion: f32 partials of this 128-wide K block times (activation scale x weight scale).
    const float* sc = reinterpret_cast<const float*>(smem + s * kPfStageBytes + S::kATileBytes + kPfBTileBytes);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int r = wm * WM + mi * 16 + lane / 4;
      const float s_lo = sc[r] * ws, s_hi = sc[r + 8] * ws;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        acc[mi][ni][0] = fmaf(part_acc[mi][ni][0], s_lo, acc[mi][ni][0]);
        acc[mi][ni][1] = fmaf(part_acc[mi][ni][1], s_lo, acc[mi][ni][1]);
        acc[mi][ni][2] = fmaf(part_acc[mi][ni][2], s_hi, acc[mi][ni][2]);
        acc[mi][ni][3] = fmaf(part_acc[mi][ni][3], s_hi, acc[mi][ni][3]);
      }
    }
  }
  cp_async_wait<0>();

  // Epilogue: bf16 pairs straight from the accumulators.
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wm * WM + mi * 16 + lane / 4 + h * 8;
      if (r >= tile_rows) continue;
      __nv_bfloat16* dst = p.c + static_cast<size_t>(row_begin + m0 + r) * p.ldc;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int col = n0 + wn * 32 + ni * 8 + 2 * (lane % 4);
        if (col >= p.n) continue;
        *reinterpret_cast<__nv_bfloat162*>(dst + col) =
            __floats2bfloat162_rn(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
      }
    }
  }
#endif
}

}  // namespace glm5rt::kernels::detail

// Decode-shaped FP8 GEMM, cp.async form (one 8-token tile per pass): the same warp tiling, K
// permutation, mma and scale handling as fp8_gemm_decode.cuh, but the weights stream through a per-lane
// ring of DEPTH K blocks in shared memory (cp.async.cg, 16 bytes) instead of a register ring. The bytes
// in flight then cost no registers: at T=1 (576 blocks for the gate_up projection, 4-5 per SM on the
// H200) the register ring can keep only 1-2 K blocks (64-128 bytes) per lane in flight before the
// register cap forces a second wave; this ring keeps DEPTH-1 (up to 5) in flight at ~70 registers
// (7 blocks per SM by registers; shared memory then sets the depth that still fits one wave).
//
// Each lane reads back only the bytes it copied itself, so cp.async.wait_group is the only
// synchronisation (no barrier: warps of a block run independently, as in the register form). Layout of
// a warp's stage (2 KB): 4 regions of 512 bytes (load i = row lo / lo+64 / hi / hi+64), lane l at 16 l,
// so each LDS.128 of a warp reads 512 contiguous bytes (no bank conflicts).
#pragma once

#include "kernels/gemm/fp8_common.cuh"
#include "kernels/gemm/fp8_gemm.h"
#include "kernels/gemm/fp8_gemm_decode.cuh"
#include "kernels/gemm/launch.cuh"

namespace glm5rt::kernels::detail {

constexpr int kDecodeAsyncStageBytes = 4 * 512;  // per warp and K block

template <int DEPTH>
constexpr int decode_async_smem_bytes() { return kDecodeWarps * DEPTH * kDecodeAsyncStageBytes; }

// The fused MoE combine (Fp8GemmParams::combine_*) for the 16 output columns [col0, col0 + 16) of one
// warp, run by the warp that arrived last for them: every other warp's C values for these columns are
// stored and fenced. The arithmetic is moe_combine's (combine_kernel in kernels/moe/moe_epilogues.cu):
// fmaf(w, y, acc) over k in order from 0, then + the shared row, rounded to bf16 once.
__device__ __forceinline__ void decode_fused_combine(const Fp8GemmParams& p, int col0, int lane) {
  const int shared_row0 = p.combine_shared_row_begin ? __ldcg(p.combine_shared_row_begin) : -1;
  // Pairs of adjacent columns (n and ldc are even): 8 items per token, so at T = 8 two per lane.
  const uint32_t* y = reinterpret_cast<const uint32_t*>(p.c);
  uint32_t* out = reinterpret_cast<uint32_t*>(p.combine_out);
  const int ldc2 = p.ldc / 2, n2 = p.n / 2;
  constexpr int kChunk = 8;  // (t, k) entries whose loads are in flight together (L2 latency, not work)
  for (int item = lane; item < p.combine_tokens * 8; item += 32) {
    const int t = item / 8, col2 = col0 / 2 + item % 8;
    if (col2 >= n2) continue;
    const int* slots = p.combine_slot_row + static_cast<size_t>(t) * p.combine_top_k;
    const float* wts = p.combine_weights + static_cast<size_t>(t) * p.combine_top_k;
    const uint32_t sv = shared_row0 >= 0 ? __ldcg(y + static_cast<size_t>(shared_row0 + t) * ldc2 + col2) : 0u;
    float acc0 = 0.f, acc1 = 0.f;
    for (int k0 = 0; k0 < p.combine_top_k; k0 += kChunk) {
      int row[kChunk];
      float w[kChunk];
      uint32_t v[kChunk];
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        row[j] = k0 + j < p.combine_top_k ? __ldcg(slots + k0 + j) : -1;
        w[j] = k0 + j < p.combine_top_k ? __ldcg(wts + k0 + j) : 0.f;
      }
#pragma unroll
      for (int j = 0; j < kChunk; ++j) v[j] = row[j] >= 0 ? __ldcg(y + static_cast<size_t>(row[j]) * ldc2 + col2) : 0u;
#pragma unroll
      for (int j = 0; j < kChunk; ++j)  // k order; dropped slots skipped, as in moe_combine
        if (row[j] >= 0) {
          acc0 = fmaf(w[j], __uint_as_float(v[j] << 16), acc0);
          acc1 = fmaf(w[j], __uint_as_float(v[j] & 0xffff0000u), acc1);
        }
    }
    if (shared_row0 >= 0) {
      acc0 += __uint_as_float(sv << 16);
      acc1 += __uint_as_float(sv & 0xffff0000u);
    }
    const __nv_bfloat162 o = __floats2bfloat162_rn(acc0, acc1);
    out[static_cast<size_t>(t) * n2 + col2] = *reinterpret_cast<const uint32_t*>(&o);
  }
}

// Shared memory of the fused SwiGLU prologue (Fp8GemmParams::swiglu_*) after the ring: `rows` rows of
// k e4m3 bytes at a stride of k + 64 (consecutive rows 64 bytes apart in the banks: the LDS.128 of a
// quarter warp, 2 rows x 64 bytes, do not conflict), then rows x k/128 float scales.
__host__ __device__ constexpr int decode_swiglu_row_stride(int k) { return k + 64; }
inline size_t decode_swiglu_smem_bytes(int rows, int k) {
  return static_cast<size_t>(rows) * decode_swiglu_row_stride(k) + sizeof(float) * rows * (k / kFp8Block);
}

// COMBINE: the fused MoE combine epilogue; SWIGLU: the fused SwiGLU prologue (Fp8GemmParams::swiglu_*).
// GENERAL: unequal parts / strided weights (decode_part_of). LINES: whole-line copies (Fp8GemmParams::decode_line_copies;
// its own instantiation, so that the kernels without it keep their code and registers): each cp.async
// instruction of a warp copies 4 rows x 128 contiguous bytes (every 128-byte line of weights requested once,
// whole) instead of 8 rows x 64 bytes (each line requested as two halves by two instructions); lane l copies
// chunk l % 8 of rows 4i + l / 8 into row * 128 + ((chunk ^ ((row & 1) << 2)) << 4) of the warp's stage (the
// XOR keeps both the copies and the fragment reads free of bank conflicts), and since a lane then reads bytes
// that other lanes copied, a __syncwarp follows each cp.async wait. The same bytes reach the same mma
// operands: the same bits.
template <int DEPTH, bool COMBINE = false, bool SWIGLU = false, bool GENERAL = false, bool LINES = false>
__global__ void __launch_bounds__(kDecodeThreads, 7) fp8_gemm_decode_async_kernel(const Fp8GemmParams p) {
  static_assert(!LINES || !GENERAL, "whole-line copies need 128-byte aligned rows (not the general form)");
  constexpr int kRows = kDecodeRows;  // weight rows per block
#if GLM5RT_HAS_FP8_MMA
  // With group_info_ready the group metadata and the weights were complete before the previous kernel
  // started: look up the group and start streaming the first K blocks of weights, then wait for the
  // previous kernel (whose output, A, is read only after the wait).
  const bool early = p.group_info_ready;
  if (threadIdx.x == 0) stamp(p.debug_stamps, kStampStart);
  if (!early) pdl_wait_and_release();
  extern __shared__ __align__(16) uint8_t decode_smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int g = 0, row_begin = 0, rows = p.max_rows;
  if (p.group_offsets) {
    const int active = *p.num_active;
    if (static_cast<int>(blockIdx.y) >= active) {
      if constexpr (COMBINE) {
        // No active group at all (every id dropped and no shared expert): no warp would arrive at the
        // counters, so the first row of blocks writes the combine (all zeros, as moe_combine would).
        if (active == 0 && blockIdx.y == 0) {
          if (early) pdl_wait_and_release();
          const int col0 = blockIdx.x * kRows + warp * 16;
          if (col0 < p.n) decode_fused_combine(p, col0, lane);
        }
      }
      return;
    }
    g = p.active_groups[blockIdx.y];
    row_begin = p.group_offsets[g];
    rows = p.group_offsets[g + 1] - row_begin;
  }
  if (rows <= 0) return;
  const int n_block = blockIdx.x * kRows;
  const DecodePart dp = decode_part_of<GENERAL>(p, n_block);
  const int part = dp.part;
  const int n_in_part = n_block - dp.first;
  const int part_valid_rows = dp.rows;
  const int warp_row = n_in_part + warp * 16;
  if (warp_row >= part_valid_rows) return;  // no block-level synchronisation below: safe to leave
  const DecodeWarpRows wr = decode_warp_rows<GENERAL>(p, g, dp, n_in_part, warp_row, lane);
  const uint8_t* a_base = p.a + wr.c * 16;
  const uint32_t ring = smem_u32(decode_smem) + warp * DEPTH * kDecodeAsyncStageBytes + lane * 16;
  // LINES: this lane's copy source (chunk lane % 8 of row lane / 8, + 4i rows for copy i), its stage offset,
  // the rows of this warp inside the part (rows past them read row 0, never stored), and the stage offset
  // of its first fragment (row gq, bytes 16c; +64 bytes: rd0 ^ 64; row gq + 8: + 1024).
  const int lq = lane / 8, lj = lane % 8;
  const int valid = part_valid_rows - warp_row;
  const uint8_t* w_line = wr.W + static_cast<size_t>(warp_row) * wr.ldw + lj * 16;
  const uint32_t line_dst =
      smem_u32(decode_smem) + warp * DEPTH * kDecodeAsyncStageBytes + lq * 128 + ((lj ^ ((lq & 1) << 2)) << 4);
  const int rd0 = wr.gq * 128 + ((wr.c ^ ((wr.gq & 1) << 2)) << 4);

  const bool evict_first = p.decode_evict_first;
  const uint64_t policy = evict_first ? l2_policy_evict_first() : 0;
  auto issue = [&](int kb) {
    if constexpr (LINES) {
      const uint8_t* w = w_line + static_cast<size_t>(kb) * kFp8Block;
      const uint32_t dst = line_dst + (kb % DEPTH) * kDecodeAsyncStageBytes;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = 4 * i + lq;
        const uint8_t* src = w + (r < valid ? r : 0) * wr.ldw;
        if (evict_first)
          cp_async_16_hint(dst + 512 * i, src, 16, policy);
        else
          cp_async_16(dst + 512 * i, src, 16);
      }
      return;
    }
    const uint8_t* w = wr.w_base + static_cast<size_t>(kb) * kFp8Block;
    const uint32_t dst = ring + (kb % DEPTH) * kDecodeAsyncStageBytes;
    if (evict_first) {
      cp_async_16_hint(dst, w + wr.off_lo, 16, policy);
      cp_async_16_hint(dst + 512, w + wr.off_lo + 64, 16, policy);
      cp_async_16_hint(dst + 1024, w + wr.off_hi, 16, policy);
      cp_async_16_hint(dst + 1536, w + wr.off_hi + 64, 16, policy);
    } else {
      cp_async_16(dst, w + wr.off_lo, 16);
      cp_async_16(dst + 512, w + wr.off_lo + 64, 16);
      cp_async_16(dst + 1024, w + wr.off_hi, 16);
      cp_async_16(dst + 1536, w + wr.off_hi + 64, 16);
    }
  };
  const uint8_t* ring_ptr = decode_smem + warp * DEPTH * kDecodeAsyncStageBytes + lane * 16;
  const uint8_t* stage_ptr = decode_smem + warp * DEPTH * kDecodeAsyncStageBytes;  // LINES

  auto prologue = [&] {
#pragma unroll
    for (int s = 0; s < DEPTH - 1; ++s) {
      if (s < wr.kblocks) issue(s);
      cp_async_commit();
    }
  };
  prologue();
  if (early) {
    // L2 prefetch of the next K blocks of this warp's 16 rows (one 128-byte K block per row: both
    // halves, since a row need not start on a 128-byte line); lanes c == 0 cover the warp's rows.
    if (wr.c == 0) {
      const int kb_end = min(wr.kblocks, DEPTH - 1 + p.decode_l2_prefetch);
      for (int kb = DEPTH - 1; kb < kb_end; ++kb) {
        const uint8_t* w = wr.w_base + static_cast<size_t>(kb) * kFp8Block;
        prefetch_l2(w + wr.off_lo);
        prefetch_l2(w + wr.off_lo + 64);
        prefetch_l2(w + wr.off_hi);
        prefetch_l2(w + wr.off_hi + 64);
      }
    }
    pdl_wait_and_release();
  }
  if (threadIdx.x == 0) stamp(p.debug_stamps, kStampWaited);

  // Rows of a group per pass: 8 (the mma's N), or with the SwiGLU prologue the rows it has room for.
  const int step = SWIGLU ? p.swiglu_rows : 8;
  uint8_t* const h_sm = decode_smem + kDecodeWarps * DEPTH * kDecodeAsyncStageBytes;
  const int h_ld = decode_swiglu_row_stride(p.k);
  float* const hs_sm = reinterpret_cast<float*>(h_sm + static_cast<size_t>(SWIGLU ? p.swiglu_rows : 0) * h_ld);
  for (int tok0 = 0; tok0 < rows; tok0 += step) {
    int b_src, s_src[2];
    if constexpr (SWIGLU) {
      // This pass's rows of A from the gate_up output (read after the PDL wait above): one warp per
      // (row, 128-group), every warp of the block taking part (all are active: n and part_rows are
      // multiples of 64), then a barrier. Indices below are rows of the pass (0 .. step-1), -1 outside.
      const int nr = min(step, rows - tok0);
      if (tok0 > 0) __syncthreads();  // every warp has finished reading the previous pass's rows
      for (int item = warp; item < nr * wr.kblocks; item += kDecodeWarps) {
        const int r = item / wr.kblocks, grp = item - r * wr.kblocks;
        const __nv_bfloat16* src =
            p.swiglu_gate_up + static_cast<size_t>(row_begin + tok0 + r) * p.swiglu_ld + grp * kFp8Block;
        float sc = 0.f;
        const uint32_t packed = swiglu_quantize_group_warp(src, src + p.k, &sc);
        *reinterpret_cast<uint32_t*>(h_sm + r * h_ld + grp * kFp8Block + lane * 4) = packed;
        if (lane == 0) hs_sm[r * wr.kblocks + grp] = sc;
      }
      __syncthreads();
      b_src = wr.gq < nr ? wr.gq : -1;
#pragma unroll
      for (int e = 0; e < 2; ++e) s_src[e] = 2 * wr.c + e < nr ? 2 * wr.c + e : -1;
    } else {
      const int tb = tok0 + wr.gq;
      b_src = tb < rows ? (p.a_row_map ? p.a_row_map[row_begin + tb] : row_begin + tb) : -1;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int ts = tok0 + 2 * wr.c + e;
        s_src[e] = ts < rows ? (p.a_row_map ? p.a_row_map[row_begin + ts] : row_begin + ts) : -1;
      }
    }
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int kb = 0; kb < wr.kblocks; ++kb) {
      cp_async_wait<DEPTH - 2>();  // this lane's copies of K block kb have landed
      // LINES: and every other lane's (whose bytes this lane reads); also orders the previous iteration's
      // reads of the slot refilled below before the refill.
      if constexpr (LINES) __syncwarp();
      {
        const int nk = kb + DEPTH - 1;  // refills the slot read in the previous iteration
        if (nk < wr.kblocks) issue(nk);
        cp_async_commit();
      }
      uint4 wv[4];
      if constexpr (LINES) {
        const uint8_t* st = stage_ptr + (kb % DEPTH) * kDecodeAsyncStageBytes;
        wv[0] = *reinterpret_cast<const uint4*>(st + rd0);
        wv[1] = *reinterpret_cast<const uint4*>(st + (rd0 ^ 64));
        wv[2] = *reinterpret_cast<const uint4*>(st + rd0 + 1024);
        wv[3] = *reinterpret_cast<const uint4*>(st + (rd0 ^ 64) + 1024);
      } else {
        const uint8_t* st = ring_ptr + (kb % DEPTH) * kDecodeAsyncStageBytes;
#pragma unroll
        for (int i = 0; i < 4; ++i) wv[i] = *reinterpret_cast<const uint4*>(st + 512 * i);
      }
      const float ws = __ldg(wr.ws_row + kb);
      uint4 b0 = make_uint4(0, 0, 0, 0), b1 = make_uint4(0, 0, 0, 0);
      if (b_src >= 0) {
        if constexpr (SWIGLU) {
          const uint8_t* b = h_sm + b_src * h_ld + kb * kFp8Block + wr.c * 16;
          b0 = *reinterpret_cast<const uint4*>(b);
          b1 = *reinterpret_cast<const uint4*>(b + 64);
        } else {
          const uint8_t* b = a_base + static_cast<size_t>(b_src) * p.lda + kb * kFp8Block;
          b0 = __ldg(reinterpret_cast<const uint4*>(b));
          b1 = __ldg(reinterpret_cast<const uint4*>(b + 64));
        }
      }
      float d[4];
      decode_kblock_mma(d, wv, b0, b1);
      float s0, s1;
      if constexpr (SWIGLU) {
        s0 = s_src[0] >= 0 ? hs_sm[s_src[0] * wr.kblocks + kb] * ws : 0.f;
        s1 = s_src[1] >= 0 ? hs_sm[s_src[1] * wr.kblocks + kb] * ws : 0.f;
      } else {
        s0 = s_src[0] >= 0 ? __ldg(p.a_scale + static_cast<size_t>(s_src[0]) * p.ld_scale + kb) * ws : 0.f;
        s1 = s_src[1] >= 0 ? __ldg(p.a_scale + static_cast<size_t>(s_src[1]) * p.ld_scale + kb) * ws : 0.f;
      }
      acc[0] = fmaf(d[0], s0, acc[0]);
      acc[1] = fmaf(d[1], s1, acc[1]);
      acc[2] = fmaf(d[2], s0, acc[2]);
      acc[3] = fmaf(d[3], s1, acc[3]);
    }
    cp_async_wait<0>();  // no copy may still target the ring when the next pass refills it
    if constexpr (LINES) __syncwarp();  // nor may another lane still read a slot this lane refills
    if (tok0 + step < rows) prologue();

#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int ts = tok0 + 2 * wr.c + e;
      if (ts >= rows || (SWIGLU && 2 * wr.c + e >= step)) continue;
      __nv_bfloat16* dst = p.c + static_cast<size_t>(row_begin + ts) * p.ldc;
      if (wr.ok_lo) dst[wr.n_lo] = __float2bfloat16_rn(acc[e]);
      if (wr.ok_hi) dst[wr.n_lo + 8] = __float2bfloat16_rn(acc[2 + e]);
    }
  }
  if (lane == 0) stamp(p.debug_stamps, kStampEnd);
  if constexpr (COMBINE) {
    // Count this warp's 16 columns as done (after its stores are visible device-wide); the last of the
    // *num_active groups' warps for these columns combines them (threadFenceReduction pattern).
    __threadfence();
    __syncwarp();
    const int col0 = (GENERAL ? dp.first : part * p.part_rows) + warp_row;
    int last = 0;
    if (lane == 0) {
      int* counter = p.combine_counters + col0 / 16;
      const int arrived = atomicAdd(counter, 1) + 1;
      last = arrived == *p.num_active;
      if (last) *counter = 0;  // ready for the next run (the front zeroes it as well)
    }
    last = __shfl_sync(0xffffffffu, last, 0);
    if (last) {
      __threadfence();
      decode_fused_combine(p, col0, lane);
      if (lane == 0) stamp(p.debug_stamps, kStampEnd);
    }
  }
#endif
}

}  // namespace glm5rt::kernels::detail

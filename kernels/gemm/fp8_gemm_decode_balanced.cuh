// Decode-shaped FP8 GEMM, cp.async ring, balanced form (Fp8GemmParams::decode_balanced): the same warp
// computation as fp8_gemm_decode_async.cuh (one warp = 16 weight rows of one group over all of K, the
// same K order, mma and scale arithmetic: the same output bits), but warps take their work from per-SM
// queues instead of from their block index.
//
// Why: at T=1 the grid form is 576 blocks (gate_up) on 132 SMs, i.e. 4 or 5 blocks per SM, and an SM's
// share of DRAM bandwidth, not the block, sets the pace: the SMs with 5 blocks finish ~20 us after those
// with 4 (round 5 timeline). Here the flat list of warp items (active group x 16-row slice, group-major)
// is cut into one contiguous range per SM (equal to one item), and the warps resident on SM s (%smid)
// take items of range s through an atomic counter, so every SM streams the same bytes whatever number of
// blocks the scheduler placed on it (also when a PDL early start placed 7 blocks on some SMs and 3 on
// others). A range whose SM got no block is drained by the last warp to finish (correct, slow; not
// expected: the grid is every resident slot of every SM). The same warp also resets the counters to zero.
//
// Form 1 (queue = %smid mod SMs) measured 2.2x slower than the grid form on the H200 (round 6: T=1
// gate_up warps ending between 19 and 155 us; T=8 first queue done at 238 us, last at 509). Form 2
// (STEAL) answers the two possible causes: %smid values that are not 0..SMs-1 (queues without an SM:
// each block registers its %smid in a table and gets a dense index in order of first arrival), and SMs
// that stream at different rates (a warp that has done an item of its own then takes items from the
// fullest other queue, so the faster SMs do more); and its queues hold every sms-th item instead of a
// contiguous range (in case an SM streaming one contiguous window of weights is what was slow).
#pragma once

#include "kernels/gemm/fp8_gemm_decode_async.cuh"

namespace glm5rt::kernels::detail {

__device__ __forceinline__ int sm_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return static_cast<int>(id);
}

// sms: queues (the device's SM count, <= kFp8BalancedMaxSms); counters: [sms] item counters, [sms] the
// number of warps that have finished.
// Minimum resident blocks for the register cap: shared memory allows at most 5 blocks per SM at depth 5
// (4 at depth 6), so those need not squeeze into the 7-block cap of depths 3 / 4 (form 2 would spill).
template <int DEPTH, bool COMBINE = false, bool STEAL = false>
__global__ void __launch_bounds__(kDecodeThreads, DEPTH >= 5 ? 5 : 7)
    fp8_gemm_decode_balanced_kernel(const Fp8GemmParams p, int sms) {
#if GLM5RT_HAS_FP8_MMA
  const bool early = p.group_info_ready;
  if (threadIdx.x == 0) stamp(p.debug_stamps, kStampStart);
  if constexpr (!COMBINE) {
    if (!early && p.pre_wait_prefetch_kblocks > 0) decode_pre_wait_prefetch(p);
  }
  if (!early) pdl_wait_and_release();
  if (!early && threadIdx.x == 0) stamp(p.debug_stamps, kStampWaited);
  bool waited = !early;
  extern __shared__ __align__(16) uint8_t decode_smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int* const counters = p.balanced_counters;
  // STEAL (form 2): this block's queue, a dense index per SM in order of first arrival (the table maps
  // %smid + 1 -> index + 1; kClaim while the first block of that SM takes an index).
  int block_q = 0;
  if constexpr (STEAL) {
    __shared__ int q_sh;
    if (threadIdx.x == 0) {
      const int smid = sm_id();
      int q = smid % sms;
      if (smid < kFp8BalancedSmidTable) {
        constexpr int kClaim = 0x7fffffff;
        int* const slot = counters + kFp8BalancedMaxSms + 2 + smid;
        const int old = atomicCAS(slot, 0, kClaim);
        if (old == 0) {
          q = atomicAdd(counters + kFp8BalancedMaxSms + 1, 1) % sms;
          atomicExch(slot, q + 1);
        } else {
          int v = old;
          while (v == kClaim) v = atomicAdd(slot, 0);  // the SM's first block is writing it
          q = v - 1;
        }
      }
      q_sh = q;
    }
    __syncthreads();
    block_q = q_sh;
  }
  const int active = p.group_offsets ? __ldcg(p.num_active) : 1;
  const int slices = (p.num_parts * p.part_rows + 15) / 16;
  const int total = active * slices;  // < 2^31 (checked by the launcher)
  const int kblocks = p.k / kFp8Block;
  const int gq = lane / 4, c = lane % 4;
  const uint32_t ring = smem_u32(decode_smem) + warp * DEPTH * kDecodeAsyncStageBytes + lane * 16;
  const uint8_t* ring_ptr = decode_smem + warp * DEPTH * kDecodeAsyncStageBytes + lane * 16;
  const bool evict_first = p.decode_evict_first;
  const uint64_t policy = evict_first ? l2_policy_evict_first() : 0;
  const uint8_t* a_base = p.a + c * 16;

  if constexpr (COMBINE) {
    // No active group (every id dropped and no shared expert): no warp arrives at the combine counters,
    // so the warps write the (all-zero) combine themselves, as moe_combine would.
    if (active == 0) {
      if (!waited) {
        pdl_wait_and_release();
        waited = true;
      }
      const int gw = blockIdx.x * kDecodeWarps + warp, nw = gridDim.x * kDecodeWarps;
      for (int col0 = gw * 16; col0 < p.n; col0 += nw * 16) decode_fused_combine(p, col0, lane);
    }
  }

  // One item: group index a (in active_groups), 16-row slice sl. Returns after its stores (and its
  // combine share); the ring is empty again on return.
  auto process = [&](int item) {
    const int a = item / slices, sl = item - a * slices;
    int g = 0, row_begin = 0, rows = p.max_rows;
    if (p.group_offsets) {
      g = p.active_groups[a];
      row_begin = p.group_offsets[g];
      rows = p.group_offsets[g + 1] - row_begin;
    }
    if (rows <= 0) return;
    const int col = sl * 16;
    const int part = col / p.part_rows;
    const int warp_row = col - part * p.part_rows;
    const int part_valid_rows = min(p.part_rows, p.n - part * p.part_rows);
    if (warp_row >= part_valid_rows) return;
    const uint8_t* __restrict__ W = p.w[g * p.num_parts + part];
    const float* __restrict__ WS = p.w_scale[g * p.num_parts + part];
    const float* ws_row = WS + static_cast<size_t>(warp_row / kFp8Block) * kblocks;
    const int r_lo = warp_row + gq, r_hi = r_lo + 8;
    const bool ok_lo = r_lo < part_valid_rows, ok_hi = r_hi < part_valid_rows;
    const uint8_t* w_base = W + static_cast<size_t>(warp_row) * p.k + c * 16;
    const int off_lo = ok_lo ? gq * p.k : 0, off_hi = ok_hi ? (gq + 8) * p.k : 0;
    const int n_lo = part * p.part_rows + r_lo;
    auto issue = [&](int kb) {
      const uint8_t* w = w_base + static_cast<size_t>(kb) * kFp8Block;
      const uint32_t dst = ring + (kb % DEPTH) * kDecodeAsyncStageBytes;
      if (evict_first) {
        cp_async_16_hint(dst, w + off_lo, 16, policy);
        cp_async_16_hint(dst + 512, w + off_lo + 64, 16, policy);
        cp_async_16_hint(dst + 1024, w + off_hi, 16, policy);
        cp_async_16_hint(dst + 1536, w + off_hi + 64, 16, policy);
      } else {
        cp_async_16(dst, w + off_lo, 16);
        cp_async_16(dst + 512, w + off_lo + 64, 16);
        cp_async_16(dst + 1024, w + off_hi, 16);
        cp_async_16(dst + 1536, w + off_hi + 64, 16);
      }
    };
    for (int tok0 = 0; tok0 < rows; tok0 += 8) {
#pragma unroll
      for (int s = 0; s < DEPTH - 1; ++s) {
        if (s < kblocks) issue(s);
        cp_async_commit();
      }
      if (!waited) {
        // The first item of an early-started warp: its first weights are in flight, A is read after this.
        if (c == 0) {
          const int kb_end = min(kblocks, DEPTH - 1 + p.decode_l2_prefetch);
          for (int kb = DEPTH - 1; kb < kb_end; ++kb) {
            const uint8_t* w = w_base + static_cast<size_t>(kb) * kFp8Block;
            prefetch_l2(w + off_lo);
            prefetch_l2(w + off_lo + 64);
            prefetch_l2(w + off_hi);
            prefetch_l2(w + off_hi + 64);
          }
        }
        pdl_wait_and_release();
        waited = true;
        if (lane == 0) stamp(p.debug_stamps, kStampWaited);
      }
      const int tb = tok0 + gq;
      const int b_src = tb < rows ? (p.a_row_map ? p.a_row_map[row_begin + tb] : row_begin + tb) : -1;
      int s_src[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int ts = tok0 + 2 * c + e;
        s_src[e] = ts < rows ? (p.a_row_map ? p.a_row_map[row_begin + ts] : row_begin + ts) : -1;
      }
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
      for (int kb = 0; kb < kblocks; ++kb) {
        cp_async_wait<DEPTH - 2>();
        {
          const int nk = kb + DEPTH - 1;
          if (nk < kblocks) issue(nk);
          cp_async_commit();
        }
        const uint8_t* st = ring_ptr + (kb % DEPTH) * kDecodeAsyncStageBytes;
        uint4 wv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) wv[i] = *reinterpret_cast<const uint4*>(st + 512 * i);
        const float ws = __ldg(ws_row + kb);
        uint4 b0 = make_uint4(0, 0, 0, 0), b1 = make_uint4(0, 0, 0, 0);
        if (b_src >= 0) {
          const uint8_t* b = a_base + static_cast<size_t>(b_src) * p.lda + kb * kFp8Block;
          b0 = __ldg(reinterpret_cast<const uint4*>(b));
          b1 = __ldg(reinterpret_cast<const uint4*>(b + 64));
        }
        float d[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint4& lo = j < 2 ? wv[0] : wv[1];
          const uint4& hi = j < 2 ? wv[2] : wv[3];
          const uint4& bb = j < 2 ? b0 : b1;
          const int w0 = (2 * j) % 4, w1 = (2 * j + 1) % 4;
          mma_e4m3_16832(d, word_of(lo, w0), word_of(hi, w0), word_of(lo, w1), word_of(hi, w1), word_of(bb, w0),
                         word_of(bb, w1));
        }
        const float s0 = s_src[0] >= 0 ? __ldg(p.a_scale + static_cast<size_t>(s_src[0]) * p.ld_scale + kb) * ws : 0.f;
        const float s1 = s_src[1] >= 0 ? __ldg(p.a_scale + static_cast<size_t>(s_src[1]) * p.ld_scale + kb) * ws : 0.f;
        acc[0] = fmaf(d[0], s0, acc[0]);
        acc[1] = fmaf(d[1], s1, acc[1]);
        acc[2] = fmaf(d[2], s0, acc[2]);
        acc[3] = fmaf(d[3], s1, acc[3]);
      }
      cp_async_wait<0>();  // the ring is empty before the next pass or item refills it
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int ts = tok0 + 2 * c + e;
        if (ts >= rows) continue;
        __nv_bfloat16* dst = p.c + static_cast<size_t>(row_begin + ts) * p.ldc;
        if (ok_lo) dst[n_lo] = __float2bfloat16_rn(acc[e]);
        if (ok_hi) dst[n_lo + 8] = __float2bfloat16_rn(acc[2 + e]);
      }
    }
    if constexpr (COMBINE) {
      // As the grid form: count these 16 columns of this group as done; the last of *num_active combines.
      __threadfence();
      __syncwarp();
      const int col0 = part * p.part_rows + warp_row;
      int last = 0;
      if (lane == 0) {
        int* counter = p.combine_counters + col0 / 16;
        const int arrived = atomicAdd(counter, 1) + 1;
        last = arrived == active;
        if (last) *counter = 0;
      }
      last = __shfl_sync(0xffffffffu, last, 0);
      if (last) {
        __threadfence();
        decode_fused_combine(p, col0, lane);
      }
    }
  };

  // Queue q's items: form 1 a contiguous range of the flat list; form 2 (STEAL) every sms-th item from q
  // (q, q + sms, ...), so that an SM's items spread over the groups and weight rows as the grid form's
  // round-robin block placement spreads them (in case an SM streaming one contiguous 1-2 MB window is
  // what made form 1 slow).
  auto q_begin = [&](int q) { return static_cast<int>(static_cast<long long>(total) * q / sms); };
  auto q_size = [&](int q) -> int {
    if constexpr (STEAL) return q < total ? (total - q + sms - 1) / sms : 0;
    return q_begin(q + 1) - q_begin(q);
  };
  auto q_item = [&](int q, int idx) -> int {
    if constexpr (STEAL) return q + idx * sms;
    return q_begin(q) + idx;
  };
  // Takes items of queue q until it is empty.
  int items_done = 0;
  auto drain = [&](int q) {
    const int size = q_size(q);
    for (;;) {
      int idx = 0;
      if (lane == 0) idx = atomicAdd(counters + q, 1);
      idx = __shfl_sync(0xffffffffu, idx, 0);
      if (idx >= size) return;
      process(q_item(q, idx));
      ++items_done;
    }
  };
  const int my_q = STEAL ? block_q : sm_id() % sms;
  drain(my_q);
  // STEAL: a warp that has done an item of its own (at the T=1 shape the warps without one leave the rest
  // alone, so that an SM does not start more than its share at once) takes items from the other queue
  // with the most left (ties: lowest index) until none has any.
  if (STEAL && items_done > 0) {
    // Counters loaded 4 x 32 at a time (fewer live registers: the 7-block register cap of depths 3 / 4).
    constexpr int kBatch = 4;
    for (;;) {
      int best_q = -1, best_left = 0;
#pragma unroll 1
      for (int q0 = 0; q0 < sms; q0 += kBatch * 32) {
        int left[kBatch];
#pragma unroll
        for (int ch = 0; ch < kBatch; ++ch) {
          const int q = q0 + ch * 32 + lane;
          left[ch] = 0;
          if (q < sms && q != my_q) {
            const int size = q_size(q);
            left[ch] = size - min(__ldcg(counters + q), size);
          }
        }
#pragma unroll
        for (int ch = 0; ch < kBatch; ++ch) {
          const unsigned mx = __reduce_max_sync(0xffffffffu, static_cast<unsigned>(left[ch]));
          if (mx > static_cast<unsigned>(best_left)) {
            best_left = static_cast<int>(mx);
            best_q = static_cast<int>(__reduce_min_sync(
                0xffffffffu,
                static_cast<unsigned>(left[ch]) == mx ? static_cast<unsigned>(q0 + ch * 32 + lane) : 0xffffffffu));
          }
        }
      }
      if (best_q < 0) break;
      const int size = q_size(best_q);
      int idx = 0;
      if (lane == 0) idx = atomicAdd(counters + best_q, 1);
      idx = __shfl_sync(0xffffffffu, idx, 0);
      if (idx < size) process(q_item(best_q, idx));
    }
  }
  // The last warp of the grid to get here: every other warp has stopped taking items. Queues of SMs that
  // got no block still hold items: take them, then leave every counter at zero for the next launch.
  int last = 0;
  if (lane == 0) last = atomicAdd(counters + sms, 1) == static_cast<int>(gridDim.x) * kDecodeWarps - 1;
  last = __shfl_sync(0xffffffffu, last, 0);
  if (last) {
    __threadfence();
    for (int q = 0; q < sms; ++q)
      if (q != my_q) drain(q);
    for (int q = lane; q <= sms; q += 32) atomicExch(counters + q, 0);
    if constexpr (STEAL) {
      for (int i = lane; i < 1 + kFp8BalancedSmidTable; i += 32) atomicExch(counters + kFp8BalancedMaxSms + 1 + i, 0);
    }
  }
  if (lane == 0) stamp(p.debug_stamps, kStampEnd);
#endif
}

}  // namespace glm5rt::kernels::detail

// Exact top-k of each score row: radix select over a 64-bit composite key (score order key << 32 |
// ~position), so that all keys are distinct and "equal scores: lower position wins" falls out of the
// comparison. One 1024-thread block per row, 11-bit digits, shared-memory histograms.
//
//  pass 1 (global row): histogram of the top digit; the digit d0 holding the k-th key follows.
//  pass 2 (global row): keys whose top digit > d0 are emitted; keys with digit d0 are the candidates,
//          kept in shared memory when they fit (the usual case), histogrammed on the next digit.
//  further digits: histograms over the candidates only, until the bin holding the k-th key holds
//          exactly the number still needed; then every candidate >= that bin's lower bound is emitted.
// When the candidates do not fit (heavily tied or very concentrated rows) the later passes re-read the
// row from global memory instead: slower, same result. Keys are distinct, so at the latest the last
// digit decides (a bin of the full key holds one key).
#include "kernels/indexer/indexer_common.cuh"
#include "kernels/indexer/indexer_params.hpp"

#include <cstdint>

namespace glm5rt::kernels::indexer {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kDigitBits = 11;
constexpr int kBins = 1 << kDigitBits;
constexpr int kCandCap = 4608;  // candidates kept in shared memory (score key + position: 8 bytes each)
// 64-bit key = 6 digits: shifts 53, 42, 31, 20, 9 (11 bits each), then 0 (the last 9 bits).
constexpr int kLevels = 6;
static_assert(kThreads * 2 == kBins, "find_digit gives each thread two bins");
static_assert(kBins * 4 + kCandCap * 8 + 256 <= 48 * 1024, "top-k shared memory must stay within 48 KB");

__device__ __forceinline__ int level_shift(int level) { return level < 5 ? 53 - 11 * level : 0; }
__device__ __forceinline__ uint32_t level_mask(int level) { return level < 5 ? kBins - 1 : (1u << 9) - 1; }

struct TopkShared {
  uint32_t hist[kBins];
  uint32_t cand_key[kCandCap];
  uint32_t cand_pos[kCandCap];
  uint32_t warp_sum[kWarpsPerBlock];
  uint32_t out_count;
  uint32_t cand_count;
  uint32_t digit;       // result of find_digit
  uint32_t above;       // keys in bins above digit
};

// Finds the bin d such that (keys in bins > d) < need <= (keys in bins >= d). Result in s.digit/s.above.
__device__ void find_digit(TopkShared& s, uint32_t need) {
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const int b_hi = kBins - 1 - 2 * t, b_lo = b_hi - 1;  // thread t owns two bins, scanned from the top
  const uint32_t h_hi = s.hist[b_hi], h_lo = s.hist[b_lo];
  uint32_t v = h_hi + h_lo;
  // inclusive warp scan
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  if (lane == 31) s.warp_sum[warp] = v;
  __syncthreads();
  if (warp == 0) {
    uint32_t w = s.warp_sum[lane];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t n = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += n;
    }
    s.warp_sum[lane] = w;  // inclusive prefix over warps
  }
  __syncthreads();
  const uint32_t before = (warp > 0 ? s.warp_sum[warp - 1] : 0u) + v - (h_hi + h_lo);
  if (before < need && need <= before + h_hi) {
    s.digit = b_hi;
    s.above = before;
  } else if (before + h_hi < need && need <= before + h_hi + h_lo) {
    s.digit = b_lo;
    s.above = before + h_hi;
  }
  __syncthreads();
}

__device__ __forceinline__ void clear_hist(TopkShared& s) {
  for (int i = threadIdx.x; i < kBins; i += kThreads) s.hist[i] = 0;
}

// Warp-aggregated append: one shared atomic per warp. All 32 lanes must call it.
__device__ __forceinline__ int warp_append(bool pred, uint32_t* counter) {
  const uint32_t mask = __ballot_sync(0xffffffffu, pred);
  if (mask == 0) return -1;
  const int lane = threadIdx.x % 32, leader = __ffs(mask) - 1;
  uint32_t base = 0;
  if (lane == leader) base = atomicAdd(counter, static_cast<uint32_t>(__popc(mask)));
  base = __shfl_sync(0xffffffffu, base, leader);
  return pred ? static_cast<int>(base + __popc(mask & ((1u << lane) - 1))) : -1;
}

// Calls f(pos, score_key) for every position of the row, all lanes of a warp together (f may use warp
// collectives; `valid` is false for the padding lanes of the last iteration). Loads are float4, unrolled.
template <class F>
__device__ __forceinline__ void for_each_key(const float* row, int len, F&& f) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int n4 = (len + 3) / 4;
  const float4* row4 = reinterpret_cast<const float4*>(row);
  constexpr int kUnroll = 4;
  for (int base = warp * 32; base < n4; base += kWarpsPerBlock * 32 * kUnroll) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * kWarpsPerBlock * 32 + lane;
      v[u] = i < n4 ? __ldcg(row4 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * kWarpsPerBlock * 32 + lane;
      if (base + u * kWarpsPerBlock * 32 >= n4) break;  // warp-uniform
      const float e[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int pos = 4 * i + q;
        f(pos < len, pos, detail::order_key(e[q]));
      }
    }
  }
}

__global__ void __launch_bounds__(kThreads) indexer_topk_kernel(const TopkParams p) {
  __shared__ TopkShared s;
  const RowLayout& rows = p.rows;
  const int row = blockIdx.x;
  const int len = rows.row_len[row];
  const int seq = rows.row_seq[row];
  const int k = p.k;
  int32_t* out_slots = p.out_slots + static_cast<int64_t>(row) * k;
  float* out_scores = p.out_scores ? p.out_scores + static_cast<int64_t>(row) * k : nullptr;
  const float* scores = p.scores + static_cast<int64_t>(row) * p.score_stride;

  auto emit = [&](int idx, int pos, uint32_t score_key) {
    if (idx >= k) return;  // cannot happen when the selection is right; never write past the row
    out_slots[idx] = detail::slot_of(rows, seq, pos);
    if (out_scores) out_scores[idx] = detail::order_key_to_float(score_key);
  };

  if (len <= k) {  // every visible key is selected; pad the rest
    for (int i = threadIdx.x; i < k; i += kThreads) {
      if (i < len)
        emit(i, i, detail::order_key(scores[i]));
      else {
        out_slots[i] = -1;
        if (out_scores) out_scores[i] = -__int_as_float(0x7f800000);
      }
    }
    return;
  }

  if (threadIdx.x == 0) {
    s.out_count = 0;
    s.cand_count = 0;
  }
  clear_hist(s);
  __syncthreads();

  // Pass 1: top digit over the whole row.
  for_each_key(scores, len, [&](bool valid, int pos, uint32_t sk) {
    if (valid) atomicAdd(&s.hist[sk >> 21], 1u);  // key bits 63..53 = score key bits 31..21
  });
  __syncthreads();
  find_digit(s, k);
  const uint32_t d0 = s.digit;
  uint32_t need = k - s.above;
  const bool top_bin_exact = s.hist[d0] == need;
  const bool in_smem = s.hist[d0] <= kCandCap;
  uint64_t prefix = static_cast<uint64_t>(d0) << 53;  // known high bits of the threshold
  uint64_t threshold = prefix;                       // keys >= threshold (with top digit d0) are selected
  __syncthreads();
  clear_hist(s);
  __syncthreads();

  // Pass 2: emit keys above the top bin, collect the top bin's keys, histogram their next digit.
  for_each_key(scores, len, [&](bool valid, int pos, uint32_t sk) {
    const uint32_t dig = sk >> 21;
    const bool above = valid && dig > d0;
    const int idx = warp_append(above, &s.out_count);
    if (above) emit(idx, pos, sk);
    const bool cand = valid && dig == d0;
    if (!top_bin_exact) {
      if (in_smem) {
        const int c = warp_append(cand, &s.cand_count);
        if (cand) {
          s.cand_key[c] = sk;
          s.cand_pos[c] = pos;
        }
      }
      if (cand) atomicAdd(&s.hist[(detail::rank_key(sk, pos) >> 42) & (kBins - 1)], 1u);
    }
  });
  __syncthreads();

  if (!top_bin_exact) {
    const uint32_t ncand = s.cand_count;
    for (int level = 1; level < kLevels; ++level) {
      find_digit(s, need);
      const uint32_t d = s.digit;
      need -= s.above;
      const int shift = level_shift(level);
      prefix |= static_cast<uint64_t>(d) << shift;
      const bool exact = s.hist[d] == need;
      __syncthreads();
      if (exact || level == kLevels - 1) {
        threshold = prefix;
        break;
      }
      // Histogram the next digit over the keys that share the prefix so far.
      clear_hist(s);
      __syncthreads();
      const int next_shift = level_shift(level + 1);
      const uint32_t next_mask = level_mask(level + 1);
      const uint64_t high_mask = ~((uint64_t{1} << shift) - 1);
      if (in_smem) {
        for (uint32_t i = threadIdx.x; i < ncand; i += kThreads) {
          const uint64_t key = detail::rank_key(s.cand_key[i], s.cand_pos[i]);
          if ((key & high_mask) == prefix) atomicAdd(&s.hist[(key >> next_shift) & next_mask], 1u);
        }
      } else {
        for_each_key(scores, len, [&](bool valid, int pos, uint32_t sk) {
          const uint64_t key = detail::rank_key(sk, pos);
          if (valid && (key & high_mask) == prefix) atomicAdd(&s.hist[(key >> next_shift) & next_mask], 1u);
        });
      }
      __syncthreads();
    }
  }

  // Final: emit the top-bin keys at or above the threshold (all of the top bin when it was exact).
  if (in_smem && !top_bin_exact) {
    const uint32_t ncand = s.cand_count;
    for (uint32_t base = threadIdx.x - threadIdx.x % 32; base < ncand; base += kThreads) {
      const uint32_t i = base + threadIdx.x % 32;
      const bool valid = i < ncand;
      const uint32_t sk = valid ? s.cand_key[i] : 0u, pos = valid ? s.cand_pos[i] : 0u;
      const bool take = valid && detail::rank_key(sk, pos) >= threshold;
      const int idx = warp_append(take, &s.out_count);
      if (take) emit(idx, static_cast<int>(pos), sk);
    }
  } else {
    for_each_key(scores, len, [&](bool valid, int pos, uint32_t sk) {
      const bool take = valid && (sk >> 21) == d0 && detail::rank_key(sk, pos) >= threshold;
      const int idx = warp_append(take, &s.out_count);
      if (take) emit(idx, pos, sk);
    });
  }
}

}  // namespace

cudaError_t launch_indexer_topk(const TopkParams& p, cudaStream_t stream) {
  const RowLayout& rows = p.rows;
  if (rows.num_rows < 0 || p.k < 1 || p.k > kMaxTopK || rows.page_size <= 0) return cudaErrorInvalidValue;
  if (rows.num_rows == 0) return cudaSuccess;
  if (!rows.row_seq || !rows.row_len || !rows.block_tables || !p.scores || !p.out_slots) return cudaErrorInvalidValue;
  if ((reinterpret_cast<uintptr_t>(p.scores) & 15u) != 0 || p.score_stride % 4 != 0 || p.score_stride < rows.max_row_len)
    return cudaErrorInvalidValue;
  indexer_topk_kernel<<<rows.num_rows, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_indexer(const ScoreParams& sp, int k, int32_t* out_slots, float* out_scores, cudaStream_t stream) {
  cudaError_t err = launch_indexer_scores(sp, stream);
  if (err != cudaSuccess) return err;
  TopkParams tp;
  tp.rows = sp.rows;
  tp.k = k;
  tp.scores = sp.scores;
  tp.score_stride = sp.score_stride;
  tp.out_slots = out_slots;
  tp.out_scores = out_scores;
  return launch_indexer_topk(tp, stream);
}

}  // namespace glm5rt::kernels::indexer

// Block-wide exact selection used by the fused decode kernel's last block (indexer_scores.cu): digit
// search over a histogram, warp-aggregated appends, a radix select over 64-bit rank keys, and
// block_select, the whole "k best of one row" for one block. Also the split workspace layout.
//
// block_select's first pass bins values *linearly* between the row's min and max instead of by the top
// 11 bits of the float, so that a smooth row spreads over all 2048 bins and the k-th's bin keeps few
// candidates (about 20 on Gaussian rows of 8K-128K and on the benchmark's rows, in a Python model). Any
// monotone bin function keeps the selection exact: keys in higher bins are taken whole, the candidates of
// the k-th's bin are then ranked by their full 64-bit key. Measured on the H200 (1a02634) it was still
// slow: about 20 us for an 8K row in the fused kernel's 256-thread last block, 12.1 us as the
// one-block-per-row kernel (1024 threads, from L2) against 10.3 for the top-bit kernel it replaced for
// that run. Not profiled; the suspects are the per-value chain of pass 2 (ballot, shared atomic, shuffle,
// then a block-table lookup and integer division per emitted key) and the radix levels' barriers.
#pragma once

#include "kernels/indexer/indexer_common.cuh"

#include <cstdint>

namespace glm5rt::kernels::indexer::detail {

constexpr int kDigitBits = 11;
constexpr int kBins = 1 << kDigitBits;
// 64-bit rank key = 6 digits: shifts 53, 42, 31, 20, 9 (11 bits each), then 0 (the last 9 bits).
constexpr int kLevels = 6;
constexpr int kSelectCandCap = 1024;  // candidates of the k-th's bin kept in shared memory by block_select
constexpr int kTableCap = 1024;       // block-table entries staged in shared memory (64K keys at page 64)

// The one-block and cluster selects (indexer_topk_reg.cu, indexer_topk_cluster.cu), started with PDL after
// the scores kernel: wait for it before reading the scores (a no-op below sm_90, where they launch plainly).
__device__ __forceinline__ void wait_for_producer() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Inclusive prefix sum over the 32 lanes of a warp (lane l gets the sum of lanes 0..l).
template <class T>
__device__ __forceinline__ T warp_inclusive_scan(T v, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  return v;
}

__device__ __forceinline__ int level_shift(int level) { return level < 5 ? 53 - 11 * level : 0; }
__device__ __forceinline__ uint32_t level_mask(int level) { return level < 5 ? kBins - 1 : (1u << 9) - 1; }

// Finds the bin d such that (keys in bins > d) < need <= (keys in bins >= d), over hist[kBins], with
// a block of kT threads (each owns kBins / kT consecutive bins, scanned from the top).
// Writes *digit and *above (keys in bins above d); warp_sum has kT / 32 entries. Ends with a barrier.
template <int kT>
__device__ void find_digit(const uint32_t* hist, uint32_t* warp_sum, uint32_t need, uint32_t* digit, uint32_t* above) {
  constexpr int kPer = kBins / kT;
  constexpr int kWarps = kT / 32;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const int top = kBins - 1 - t * kPer;
  uint32_t local = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) local += hist[top - i];
  uint32_t v = local;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  if (lane == 31) warp_sum[warp] = v;
  __syncthreads();
  if (warp == 0) {
    uint32_t w = lane < kWarps ? warp_sum[lane] : 0u;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t n = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += n;
    }
    if (lane < kWarps) warp_sum[lane] = w;  // inclusive prefix over warps
  }
  __syncthreads();
  uint32_t running = (warp > 0 ? warp_sum[warp - 1] : 0u) + v - local;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const uint32_t h = hist[top - i];
    if (running < need && need <= running + h) {
      *digit = top - i;
      *above = running;
    }
    running += h;
  }
  __syncthreads();
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

// Split-path workspace per row: header (histogram, emitted count, candidate count, fused-kernel block
// counter, spare) then candidates. The header must be zero before a call; every call leaves it zero
// (the finishing kernel clears what the earlier ones accumulated; the fused counter wraps to zero).
constexpr int kSplitCandCap = 4608;
constexpr int kHeaderWords = kBins + 8;
constexpr size_t kRowWorkspaceBytes = kHeaderWords * 4 + size_t(kSplitCandCap) * 8;

struct Workspace {
  uint32_t* hist;         // [kBins]
  uint32_t* out_count;    // keys emitted by the split filter
  uint32_t* cand_count;
  uint32_t* fused_count;  // blocks of the fused decode kernel done with this row
  uint32_t* cand_key;     // [kSplitCandCap]
  uint32_t* cand_pos;     // [kSplitCandCap]
};
__device__ __forceinline__ Workspace row_workspace(void* base, int num_rows, int row) {
  uint32_t* header = static_cast<uint32_t*>(base) + static_cast<size_t>(row) * kHeaderWords;
  uint32_t* cands = static_cast<uint32_t*>(base) + static_cast<size_t>(num_rows) * kHeaderWords +
                    static_cast<size_t>(row) * 2 * kSplitCandCap;
  return {header, header + kBins, header + kBins + 1, header + kBins + 2, cands, cands + kSplitCandCap};
}

template <int kT>
struct SelectShared {
  uint32_t hist[kBins];
  uint32_t cand_key[kSelectCandCap];
  uint32_t cand_pos[kSelectCandCap];
  uint32_t warp_sum[kT / 32];
  float warp_min[kT / 32], warp_max[kT / 32];
  uint32_t out_count, cand_count, digit, above;
  float lo, scale;
  int linear;
};

// Where the chosen keys go: slots through the row's block table (shared or global memory).
struct SelectOut {
  int32_t* slots;
  float* scores;  // optional
  int k;
  const int32_t* table;
  int page_size;
  __device__ __forceinline__ void put(int idx, int pos, float v) const {
    if (idx < 0 || idx >= k) return;  // cannot happen when the selection is right; never write past the row
    slots[idx] = table[pos / page_size] * page_size + pos % page_size;
    if (scores) scores[idx] = v;
  }
};

struct SmemSource {
  const float4* p;
  __device__ __forceinline__ float4 load4(int i) const { return p[i]; }
};
struct GlobalSource {
  const float4* p;
  __device__ __forceinline__ float4 load4(int i) const { return __ldcg(p + i); }
};

// Calls f(valid, pos, value) for every position of v[0, n) read through src, all lanes of a warp
// together (f may use warp collectives; `valid` is false for padding lanes). Four float4 loads in flight
// per thread before any is used, so a pass over a row in L2 waits on a quarter of the round trips.
template <int kT, class Src, class F>
__device__ __forceinline__ void for_each_value(const Src& src, int n, F&& f) {
  constexpr int kUnroll = 4;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int n4 = (n + 3) / 4;
  for (int base = warp * 32; base < n4; base += kT * kUnroll) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * kT + lane;
      v[u] = i < n4 ? src.load4(i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (base + u * kT >= n4) break;  // warp-uniform
      const int i = base + u * kT + lane;
      const float e[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
      for (int q = 0; q < 4; ++q) f(i < n4 && 4 * i + q < n, 4 * i + q, e[q]);
    }
  }
}

// Radix select over 64-bit keys: visit(f) calls f(key) for each of this thread's items. Returns the
// threshold such that exactly `need` items have key >= threshold (keys are distinct). All threads.
template <int kT, class Visit>
__device__ uint64_t radix_select(SelectShared<kT>& s, uint32_t need, Visit&& visit) {
  uint64_t prefix = 0, high = 0;
  for (int level = 0; level < kLevels; ++level) {
    const int shift = level_shift(level);
    const uint32_t dmask = level_mask(level);
    for (int i = threadIdx.x; i < kBins; i += kT) s.hist[i] = 0;
    __syncthreads();
    visit([&](uint64_t key) {
      if ((key & high) == prefix) atomicAdd(&s.hist[(key >> shift) & dmask], 1u);
    });
    __syncthreads();
    find_digit<kT>(s.hist, s.warp_sum, need, &s.digit, &s.above);
    const uint32_t d = s.digit;
    need -= s.above;
    prefix |= static_cast<uint64_t>(d) << shift;
    high |= static_cast<uint64_t>(dmask) << shift;
    const bool done = s.hist[d] == need || level == kLevels - 1;
    __syncthreads();  // all have read hist and digit before the next level clears them
    if (done) break;
  }
  return prefix;
}

// The k best of row values v[0, n) (n > k), read through src (float4 granules; entries past n are never
// used), written through out. A block of kT threads; s is its shared memory.
template <int kT, class Src>
__device__ void block_select(SelectShared<kT>& s, const Src& src, int n, int k, const SelectOut& out) {
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  // Pass 0: the row's range (and the histogram cleared meanwhile).
  float mn = __int_as_float(0x7f800000), mx = -__int_as_float(0x7f800000);
  for_each_value<kT>(src, n, [&](bool valid, int, float x) {
    if (valid) {
      mn = fminf(mn, x);
      mx = fmaxf(mx, x);
    }
  });
  for (int i = tid; i < kBins; i += kT) s.hist[i] = 0;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, o));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  }
  if (lane == 0) {
    s.warp_min[warp] = mn;
    s.warp_max[warp] = mx;
  }
  __syncthreads();
  if (tid == 0) {
    float lo = s.warp_min[0], hi = s.warp_max[0];
    for (int w = 1; w < kT / 32; ++w) {
      lo = fminf(lo, s.warp_min[w]);
      hi = fmaxf(hi, s.warp_max[w]);
    }
    const float scale = static_cast<float>(kBins) / (hi - lo);
    // Linear bins need a finite, non-empty range; otherwise (all equal, infinities) the order key's top
    // 11 bits, which are always monotone.
    s.linear = (isfinite(lo) && isfinite(hi) && hi > lo && isfinite(scale) && scale > 0.f) ? 1 : 0;
    s.lo = lo;
    s.scale = scale;
    s.out_count = 0;
    s.cand_count = 0;
  }
  __syncthreads();
  const bool linear = s.linear != 0;
  const float lo = s.lo, scale = s.scale;
  // Monotone in the value (weakly: float subtraction and multiplication round monotonically), equal
  // values (+0 and -0 included) share a bin.
  auto bin_of = [&](float v) -> uint32_t {
    if (linear) {
      const int b = static_cast<int>((v - lo) * scale);  // >= 0 for v >= lo; NaN converts to 0
      return static_cast<uint32_t>(min(max(b, 0), kBins - 1));
    }
    return order_key(v) >> (32 - kDigitBits);
  };
  // Pass 1: histogram.
  for_each_value<kT>(src, n, [&](bool valid, int, float x) {
    if (valid) atomicAdd(&s.hist[bin_of(x)], 1u);
  });
  __syncthreads();
  find_digit<kT>(s.hist, s.warp_sum, static_cast<uint32_t>(k), &s.digit, &s.above);
  const uint32_t b0 = s.digit, need = static_cast<uint32_t>(k) - s.above, c = s.hist[b0];
  const bool exact = c == need, fits = c <= static_cast<uint32_t>(kSelectCandCap);
  // Pass 2: emit the keys of higher bins (and of b0 when it is exactly what is needed), collect b0's.
  for_each_value<kT>(src, n, [&](bool valid, int pos, float x) {
    const uint32_t b = bin_of(x);
    const bool take = valid && (b > b0 || (exact && b == b0));
    const int idx = warp_append(take, &s.out_count);
    if (take) out.put(idx, pos, x);
    if (!exact && fits) {  // block-uniform
      const bool cand = valid && b == b0;
      const int ci = warp_append(cand, &s.cand_count);
      if (cand) {
        s.cand_key[ci] = order_key(x);
        s.cand_pos[ci] = static_cast<uint32_t>(pos);
      }
    }
  });
  __syncthreads();
  if (exact) return;
  if (fits) {
    // Rank bin b0's candidates by their full key (score, then lower position).
    const uint64_t thr = radix_select<kT>(s, need, [&](auto&& f) {
      for (uint32_t i = tid; i < c; i += kT) f(rank_key(s.cand_key[i], s.cand_pos[i]));
    });
    for (uint32_t base = warp * 32; base < c; base += kT) {
      const uint32_t i = base + lane;
      const bool valid = i < c;
      const uint32_t sk = valid ? s.cand_key[i] : 0u, pos = valid ? s.cand_pos[i] : 0u;
      const bool take = valid && rank_key(sk, pos) >= thr;
      const int idx = warp_append(take, &s.out_count);
      if (take) out.put(idx, static_cast<int>(pos), order_key_to_float(sk));
    }
    return;
  }
  // Too many candidates (heavy ties, extreme outliers): rank bin b0 straight from the row. Slower, exact.
  const uint64_t thr = radix_select<kT>(s, need, [&](auto&& f) {
    for_each_value<kT>(src, n, [&](bool valid, int pos, float x) {
      if (valid && bin_of(x) == b0) f(rank_key(order_key(x), static_cast<uint32_t>(pos)));
    });
  });
  for_each_value<kT>(src, n, [&](bool valid, int pos, float x) {
    const bool take = valid && bin_of(x) == b0 && rank_key(order_key(x), static_cast<uint32_t>(pos)) >= thr;
    const int idx = warp_append(take, &s.out_count);
    if (take) out.put(idx, pos, x);
  });
}

}  // namespace glm5rt::kernels::indexer::detail

// Device pieces shared by the sampler's kernels (sampling_v1.cu, sampling_v2.cu, sampling_topk.cu): the
// 64-bit candidate key, weights, block reductions, the scaled row, the workspace layout, and round 1's
// radix select (select_key), which round 2 keeps as its fallback for heavily tied rows and for top_k > 2048.
//
// Key: order(value) << 32 | ~id. Its descending order is sampler.cpp's candidate order exactly
// (descending scaled logit, -0.0 == +0.0, ties by ascending id), so every cut is a select over keys.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/sampling/sampling.h"
#include "kernels/sampling/sampling_internal.hpp"

namespace glm5rt::kernels::sampling::detail {

using u64 = unsigned long long;

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 256;
constexpr int kCandCap = 2048;
constexpr unsigned kFull = 0xffffffffu;

struct Shared {
  u64 hist[kBins];
  unsigned count[kBins];
  u64 cand_key[kCandCap];
  u64 cand_w[kCandCap];
  u64 red_u64[kWarps];
  double red_f64[kWarps];
  float red_f32[kWarps];
  u64 prefix, result;
  unsigned chosen_count, n_cand;
  int done;
};

// Value order with -0.0 == +0.0 (sampler.cpp compares floats with >, ==).
__device__ __forceinline__ uint32_t order_key(float f) {
  uint32_t u = __float_as_uint(f);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
// Larger key = earlier in sampler.cpp's order (descending value, then ascending id).
__device__ __forceinline__ u64 full_key(float v, int id) {
  return (static_cast<u64>(order_key(v)) << 32) | static_cast<u64>(~static_cast<uint32_t>(id));
}
__device__ __forceinline__ int32_t key_id(u64 key) { return static_cast<int32_t>(~static_cast<uint32_t>(key)); }
// The value back from a key (-0.0 comes back as +0.0; c - mx and exp() do not see the difference).
__device__ __forceinline__ float key_value(u64 key) {
  const uint32_t o = static_cast<uint32_t>(key >> 32);
  return __uint_as_float((o & 0x80000000u) ? (o & 0x7fffffffu) : ~o);
}

// Who takes part in a select and with which weight.
struct Filter {
  u64 lo = 0;                 // members have key >= lo (the top-k / top-p cut so far)
  bool by_count = true;       // weight 1 (top-k), else the probability in 62-bit fixed point
  const double* e = nullptr;  // exp(c - max) per id, valid for ids with key >= the top-k cut
  double sum = 1.0;           // sum of e over the top-k candidates
  double floor = -1.0;        // min-p: members need e / sum >= floor (the top key always passes)
  u64 top = 0;                // the top key
};

__device__ __forceinline__ bool weight_of(const Filter& f, u64 key, int id, u64& w) {
  if (key < f.lo) return false;
  if (f.by_count) {
    w = 1;
    return true;
  }
  const double p = f.e[id] / f.sum;  // sampler.cpp: prob[i] = exp(...) / sum
  if (p < f.floor && key != f.top) return false;
  w = p > 0.0 ? __double2ull_rz(fmin(p, 1.0) * 0x1p62) : 0ull;
  return true;
}

// weight_of with e[id] already loaded (e_id is only read when the key passes the cut).
__device__ __forceinline__ bool weight_of_loaded(const Filter& f, u64 key, double e_id, u64& w) {
  if (key < f.lo) return false;
  if (f.by_count) {
    w = 1;
    return true;
  }
  const double p = e_id / f.sum;
  if (p < f.floor && key != f.top) return false;
  w = p > 0.0 ? __double2ull_rz(fmin(p, 1.0) * 0x1p62) : 0ull;
  return true;
}

// Calls f(valid, i, c[i]) for i in [0, V), kU loads per thread in flight before any is used (a pass from
// one block is latency bound otherwise: round 1 measured ~25 us per pass over 154880 floats). All lanes of
// a warp call f together (f may use warp collectives; `valid` is false past V).
template <int kU, class F>
__device__ __forceinline__ void for_each_value(const float* c, int V, F&& f) {
  for (int base = 0; base < V; base += kU * kThreads) {
    float v[kU];
#pragma unroll
    for (int q = 0; q < kU; ++q) {
      const int i = base + q * kThreads + static_cast<int>(threadIdx.x);
      v[q] = i < V ? c[i] : 0.0f;
    }
#pragma unroll
    for (int q = 0; q < kU; ++q) {
      const int i = base + q * kThreads + static_cast<int>(threadIdx.x);
      f(i < V, i, v[q]);
    }
  }
}

enum class Target { kCount, kAtLeast, kDraw };

// The select's target from the members' total weight (the same for round 1 and round 2):
//   kCount:   param (a count);
//   kAtLeast: param * 2^62 rounded up (a probability), the total when the members never reach it;
//   kDraw:    floor(param * total) + 1, i.e. the first cumulative sum > param * total.
__device__ __forceinline__ u64 select_target(Target how, double param, u64 total) {
  u64 target = 1;
  if (how == Target::kCount) {
    target = static_cast<u64>(param);
  } else if (how == Target::kAtLeast) {
    target = __double2ull_ru(param * 0x1p62);
  } else if (total > 0) {
    u64 d = __double2ull_rz(param * static_cast<double>(total));
    if (d >= total) d = total - 1;
    target = d + 1;
  }
  if (target > total) target = total;
  if (target == 0) target = 1;
  return target;
}

// Adds w to a 64-bit shared counter with two native 32-bit atomics (a 64-bit shared-memory atomicAdd is
// a compare-and-swap loop, which is what made round 1 slow under contention). Exact: the low word's
// carry goes to the high word; the value is only read after a barrier.
__device__ __forceinline__ void atomic_add_u64_split(u64* at, u64 w) {
  unsigned* p = reinterpret_cast<unsigned*>(at);  // little-endian: p[0] low word, p[1] high word
  const unsigned lo = static_cast<unsigned>(w), hi = static_cast<unsigned>(w >> 32);
  unsigned carry = 0;
  if (lo != 0) {
    const unsigned old = atomicAdd(p, lo);
    carry = old + lo < old ? 1u : 0u;
  }
  if (hi + carry != 0) atomicAdd(p + 1, hi + carry);
}

// Round 1's bin update (kept bit for bit for the v1 kernel): a warp whose members share one bin adds once,
// otherwise every member adds (64-bit shared atomics).
struct AddRound1 {
  __device__ __forceinline__ void operator()(u64* hist, unsigned* count, bool in, int bin, u64 w) const {
    const unsigned mask = __ballot_sync(kFull, in);
    if (mask == 0) return;
    const int lane = threadIdx.x % 32;
    const int first = __shfl_sync(kFull, bin, __ffs(mask) - 1);
    if (__all_sync(kFull, !in || bin == first)) {
      u64 v = in ? w : 0ull;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
      if (lane == 0) {
        atomicAdd(&hist[first], v);
        atomicAdd(&count[first], static_cast<unsigned>(__popc(mask)));
      }
    } else if (in) {
      atomicAdd(&hist[bin], w);
      atomicAdd(&count[bin], 1u);
    }
  }
};

// Round 2's bin update: lanes are grouped by bin (__match_any_sync); when the warp's members fall into at
// most 4 bins every group is reduced over the warp and added once by lane 0, otherwise (spread bins, little
// contention) every member adds; all 64-bit adds are split into two 32-bit atomics. All lanes call it.
struct AddAggregated {
  __device__ __forceinline__ void operator()(u64* hist, unsigned* count, bool in, int bin, u64 w) const {
    const unsigned mask = __ballot_sync(kFull, in);
    if (mask == 0) return;
    const int lane = threadIdx.x % 32;
    const unsigned peers = __match_any_sync(kFull, in ? bin : -1);
    const unsigned leaders = __ballot_sync(kFull, in && (__ffs(peers) - 1) == lane);
    if (__popc(leaders) <= 4) {
      unsigned pending = leaders;
      while (pending) {  // warp-uniform
        const int src = __ffs(pending) - 1;
        pending &= pending - 1;
        const int b = __shfl_sync(kFull, bin, src);
        const bool member = in && bin == b;
        u64 v = member ? w : 0ull;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
        const unsigned n = __popc(__ballot_sync(kFull, member));
        if (lane == 0) {
          atomic_add_u64_split(&hist[b], v);
          atomicAdd(&count[b], n);
        }
      }
    } else if (in) {
      atomic_add_u64_split(&hist[bin], w);
      atomicAdd(&count[bin], 1u);
    }
  }
};

// Round 1's radix select (8-bit digits from the top of the 64-bit key, shared histograms of weights and
// counts; once the chosen bin holds at most kCandCap members they are compacted into shared memory):
// the first member key, in descending key order, at which the cumulative weight reaches
// select_target(how, param, total). Returns f.top when there is no weight at all (not reachable with
// finite logits). Add: AddRound1 (the v1 kernel) or AddAggregated (round 2's fallback).
template <class Add>
__device__ u64 select_key(const float* c, int V, const Filter& f, Target how, double param, Shared& s) {
  const Add add;
  constexpr bool kRound1 = std::is_same_v<Add, AddRound1>;
  const int tid = threadIdx.x;
  __syncthreads();  // the previous use of s is over
  if (tid == 0) {
    s.prefix = 0;
    s.done = 0;
    s.n_cand = 0;
  }
  bool compacted = false;
  // Warp 0's running state (the same in all its lanes): the target, the prefix chosen so far, the weight
  // of the members above it.
  u64 target = 1, prefix_w0 = 0, above = 0;
  bool no_weight = false;
  for (int level = 0; level < 8; ++level) {
    const int shift = 56 - 8 * level;
    for (int b = tid; b < kBins; b += kThreads) {
      s.hist[b] = 0;
      s.count[b] = 0;
    }
    __syncthreads();
    const u64 prefix = s.prefix;
    const int hi = shift + 8;  // bits above this level's digit must equal the prefix (level > 0)
    if (!compacted) {
      for (int base = 0; base < V; base += kThreads) {  // warp-converged: add uses collectives
        const int i = base + tid;
        bool in = false;
        int bin = 0;
        u64 w = 0;
        if (i < V) {
          const u64 key = full_key(c[i], i);
          if ((level == 0 || (key >> hi) == (prefix >> hi)) && weight_of(f, key, i, w)) {
            in = true;
            bin = static_cast<int>((key >> shift) & (kBins - 1));
          }
        }
        add(s.hist, s.count, in, bin, w);
      }
    } else if constexpr (kRound1) {  // round 1's loop, unchanged
      const int n = static_cast<int>(s.n_cand);
      for (int j = tid; j < n; j += kThreads) {
        const u64 key = s.cand_key[j];
        if ((key >> hi) == (prefix >> hi)) {
          const int bin = static_cast<int>((key >> shift) & (kBins - 1));
          atomicAdd(&s.hist[bin], s.cand_w[j]);
          atomicAdd(&s.count[bin], 1u);
        }
      }
    } else {
      const int n = static_cast<int>(s.n_cand);
      for (int base = 0; base < n; base += kThreads) {  // warp-converged
        const int j = base + tid;
        bool in = false;
        int bin = 0;
        u64 w = 0;
        if (j < n) {
          const u64 key = s.cand_key[j];
          if ((key >> hi) == (prefix >> hi)) {
            in = true;
            bin = static_cast<int>((key >> shift) & (kBins - 1));
            w = s.cand_w[j];
          }
        }
        add(s.hist, s.count, in, bin, w);
      }
    }
    __syncthreads();
    if (tid < 32) {
      // Warp 0 finds the bin: lane j owns bins 255 - 8j .. 248 - 8j (from the top), an exclusive scan
      // over the lanes gives the weight above each lane's bins, and the one lane whose bins take the
      // cumulative weight to the target walks them.
      const int lane = tid;
      u64 local = 0;
#pragma unroll
      for (int q = 0; q < 8; ++q) local += s.hist[kBins - 1 - 8 * lane - q];
      u64 incl = local;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const u64 n = __shfl_up_sync(kFull, incl, o);
        if (lane >= o) incl += n;
      }
      if (level == 0) {
        const u64 total = __shfl_sync(kFull, incl, 31);
        target = select_target(how, param, total);
        no_weight = total == 0;
        if (no_weight && lane == 0) {
          s.done = 1;
          s.result = f.top;
        }
      }
      if (!no_weight) {
        u64 run = above + incl - local;
        int chosen = -1;
        u64 run_at = 0;
        if (run < target && run + local >= target) {
          for (int q = 0; q < 8; ++q) {
            const int b = kBins - 1 - 8 * lane - q;
            const u64 h = s.hist[b];
            if (h == 0) continue;
            if (run + h >= target) {
              chosen = b;
              run_at = run;
              break;
            }
            run += h;
          }
        }
        const unsigned who = __ballot_sync(kFull, chosen >= 0);
        if (who == 0) {  // not reachable: the target never exceeds the weight of the region
          if (lane == 0) {
            s.done = 1;
            s.result = f.top;
          }
        } else {
          const int src = __ffs(who) - 1;
          chosen = __shfl_sync(kFull, chosen, src);
          run_at = __shfl_sync(kFull, run_at, src);
          prefix_w0 |= static_cast<u64>(chosen) << shift;
          above = run_at;
          if (lane == 0) {
            s.prefix = prefix_w0;
            s.chosen_count = s.count[chosen];
            if (level == 7) {
              s.done = 1;
              s.result = prefix_w0;
            }
          }
        }
      }
    }
    __syncthreads();
    if (s.done) break;
    if (!compacted && s.chosen_count <= static_cast<unsigned>(kCandCap)) {
      // The members under the chosen prefix fit in shared memory: collect them once.
      const u64 want = s.prefix;
      for (int i = tid; i < V; i += kThreads) {
        const u64 key = full_key(c[i], i);
        u64 w;
        if ((key >> shift) == (want >> shift) && weight_of(f, key, i, w)) {
          const unsigned slot = atomicAdd(&s.n_cand, 1u);
          if (slot < static_cast<unsigned>(kCandCap)) {
            s.cand_key[slot] = key;
            s.cand_w[slot] = w;
          }
        }
      }
      compacted = true;  // published by the next level's barrier
    }
  }
  const u64 r = s.result;
  __syncthreads();
  return r;
}

__device__ inline u64 block_max(u64 v, Shared& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const u64 x = __shfl_xor_sync(kFull, v, o);
    v = x > v ? x : v;
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) s.red_u64[threadIdx.x / 32] = v;
  __syncthreads();
  u64 m = 0;
  for (int w = 0; w < kWarps; ++w) m = s.red_u64[w] > m ? s.red_u64[w] : m;
  return m;
}

__device__ inline float block_min(float v, Shared& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(kFull, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) s.red_f32[threadIdx.x / 32] = v;
  __syncthreads();
  float m = s.red_f32[0];
  for (int w = 1; w < kWarps; ++w) m = fminf(m, s.red_f32[w]);
  return m;
}

// Deterministic: fixed per-thread ranges, fixed reduction tree.
__device__ inline double block_sum(double v, Shared& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) s.red_f64[threadIdx.x / 32] = v;
  __syncthreads();
  double t = 0.0;
  for (int w = 0; w < kWarps; ++w) t += s.red_f64[w];
  return t;
}

struct RowWork {
  float* c;
  double* e;
};
__device__ inline RowWork row_work(const SampleParams& p, int row) {
  char* base = static_cast<char*>(p.workspace);
  const Layout L = layout(p.num_rows, p.vocab);
  return {reinterpret_cast<float*>(base + L.c) + static_cast<size_t>(row) * c_stride(p.vocab),
          reinterpret_cast<double*>(base + L.e) + static_cast<size_t>(row) * p.vocab};
}

// What a one-block-per-row sampling kernel knows of its row before it reads a logit.
struct RowSetup {
  const float* logits;
  bool greedy;    // temperature 0: the argmax of the penalised logits
  bool penalise;  // a repetition penalty applies (penalty != 1 and a non-empty history window)
  RowWork work;
};
__device__ inline RowSetup row_setup(const SampleParams& p, int row) {
  const int w0 = p.window_offsets ? p.window_offsets[row] : 0;
  const int w1 = p.window_offsets ? p.window_offsets[row + 1] : 0;
  return {p.logits[row], !(p.temperature > 0.0f), p.repetition_penalty != 1.0f && w1 > w0, row_work(p, row)};
}

// c = penalised logits (greedy) or penalised logits / temperature, with sampler.cpp's float operations,
// into the row's workspace. Block-wide; ends with a barrier.
// kU > 1: that many loads in flight per thread (round 2); 1: round 1's loop.
template <int kU = 1>
__device__ inline void write_scaled_row(const SampleParams& p, int row, const float* l, float* c) {
  const int tid = threadIdx.x, V = p.vocab;
  const bool greedy = !(p.temperature > 0.0f);
  const int w0 = p.window_offsets ? p.window_offsets[row] : 0;
  const int w1 = p.window_offsets ? p.window_offsets[row + 1] : 0;
  if constexpr (kU == 1) {
    for (int i = tid; i < V; i += blockDim.x) c[i] = greedy ? l[i] : __fdiv_rn(l[i], p.temperature);
  } else {
    for_each_value<kU>(l, V, [&](bool valid, int i, float x) {
      if (valid) c[i] = greedy ? x : __fdiv_rn(x, p.temperature);
    });
  }
  __syncthreads();  // the penalty overwrites some entries; a token repeated in the window writes the same value
  if (p.repetition_penalty != 1.0f) {
    for (int j = w0 + tid; j < w1; j += blockDim.x) {
      const int32_t t = p.window[j];
      if (t < 0 || t >= V) continue;
      const float x = l[t];
      const float y = x > 0 ? __fdiv_rn(x, p.repetition_penalty) : __fmul_rn(x, p.repetition_penalty);
      c[t] = greedy ? y : __fdiv_rn(y, p.temperature);
    }
  }
  __syncthreads();
}

// Bitonic sort of keys[0, n2) descending (n2 a power of two), carrying vals along when given. Block-wide;
// ends with a barrier. Keys must be distinct apart from padding (equal keys are left in any order).
template <class T>
__device__ inline void bitonic_sort_desc(u64* keys, T* vals, int n2) {
  for (int size = 2; size <= n2; size <<= 1) {
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      for (int t = threadIdx.x; t < n2 / 2; t += blockDim.x) {
        const int i = 2 * stride * (t / stride) + (t % stride), j = i + stride;
        const bool desc = (i & size) == 0;  // the last merge (size == n2) is descending everywhere
        const u64 a = keys[i], b = keys[j];
        if (desc ? a < b : a > b) {
          keys[i] = b;
          keys[j] = a;
          if (vals) {
            const T x = vals[i];
            vals[i] = vals[j];
            vals[j] = x;
          }
        }
      }
      __syncthreads();
    }
  }
}

}  // namespace glm5rt::kernels::sampling::detail

// Device sampler (see sampling.h for the semantics and where it can differ from lib/engine/sampler.cpp).
//
// One block of 1024 threads per row:
//  1. the penalised, temperature-scaled row c (sampler.cpp's cand values, same float operations) is
//     written to the workspace (skipped for greedy rows without a penalty: c is the logits row);
//  2. the top key (max over key = order(c) << 32 | ~id) is the greedy token and gives max c;
//  3. top-k: radix select of the k-th key by count;
//  4. e[i] = exp(double(c[i] - max)) of the top-k candidates into the workspace, their double sum;
//  5. top-p: radix select of the first key whose cumulative probability (e / sum, 62-bit fixed point)
//     reaches top_p; min-p is a filter on the same probabilities (probabilities fall along the order, so
//     sampler.cpp's prefix is a filter);
//  6. the draw: radix select of the first key whose cumulative probability exceeds u * total.
// Each radix select walks 8-bit digits from the top of the 64-bit key with a shared-memory histogram of
// weights and counts; once the bin it descends into holds at most kCandCap members they are compacted
// into shared memory and the remaining digits only look at them.
#include "kernels/sampling/sampling.h"

#include <cstdint>

#include "kernels/indexer/indexer_params.hpp"

namespace glm5rt::kernels::sampling {
namespace {

using u64 = unsigned long long;

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 256;
constexpr int kCandCap = 2048;
constexpr unsigned kFull = 0xffffffffu;
// top_k up to this takes the fast path: kernels/indexer's exact radix top-k cuts each row to its k
// candidates (many blocks per row for few rows), then one block sorts them in shared memory and runs
// sampler.cpp's loops on them in its order.
constexpr int kFastTopK = 2048;

struct Shared {
  u64 hist[kBins];
  unsigned count[kBins];
  u64 cand_key[kCandCap];
  u64 cand_w[kCandCap];
  u64 red_u64[kWarps];
  double red_f64[kWarps];
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

// Who takes part in a select and with which weight.
struct Filter {
  u64 lo = 0;             // members have key >= lo (the top-k / top-p cut so far)
  bool by_count = true;   // weight 1 (top-k), else the probability in 62-bit fixed point
  const double* e = nullptr;  // exp(c - max) per id, valid for ids with key >= the top-k cut
  double sum = 1.0;       // sum of e over the top-k candidates
  double floor = -1.0;    // min-p: members need e / sum >= floor (the top key always passes)
  u64 top = 0;            // the top key
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

enum class Target { kCount, kAtLeast, kDraw };

// Adds w to bin `bin` (valid members only); all 32 lanes call it together. A warp whose members share
// one bin (common in the top digits) adds once.
__device__ __forceinline__ void add_to_bin(Shared& s, bool in, int bin, u64 w) {
  const unsigned mask = __ballot_sync(kFull, in);
  if (mask == 0) return;
  const int lane = threadIdx.x % 32;
  const int first = __shfl_sync(kFull, bin, __ffs(mask) - 1);
  if (__all_sync(kFull, !in || bin == first)) {
    u64 v = in ? w : 0ull;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
    if (lane == 0) {
      atomicAdd(&s.hist[first], v);
      atomicAdd(&s.count[first], static_cast<unsigned>(__popc(mask)));
    }
  } else if (in) {
    atomicAdd(&s.hist[bin], w);
    atomicAdd(&s.count[bin], 1u);
  }
}

// The first member key, in descending key order, at which the cumulative weight reaches the target:
//   kCount:   target = param (a count);
//   kAtLeast: target = param * 2^62 (a probability), the members' total when they never reach it;
//   kDraw:    target = floor(param * total) + 1, i.e. the first cumulative sum > param * total.
// Returns f.top when there is no weight at all (not reachable with finite logits).
__device__ u64 select_key(const float* c, int V, const Filter& f, Target how, double param, Shared& s) {
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
      for (int base = 0; base < V; base += kThreads) {  // warp-converged: add_to_bin uses collectives
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
        add_to_bin(s, in, bin, w);
      }
    } else {
      const int n = static_cast<int>(s.n_cand);
      for (int j = tid; j < n; j += kThreads) {
        const u64 key = s.cand_key[j];
        if ((key >> hi) == (prefix >> hi)) {
          const int bin = static_cast<int>((key >> shift) & (kBins - 1));
          atomicAdd(&s.hist[bin], s.cand_w[j]);
          atomicAdd(&s.count[bin], 1u);
        }
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
        target = 1;
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

__device__ u64 block_max(u64 v, Shared& s) {
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

// Deterministic: fixed per-thread ranges, fixed reduction tree.
__device__ double block_sum(double v, Shared& s) {
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
// Workspace: c rows at a stride of c_stride(V) floats (16-byte aligned rows, as the indexer's top-k reads
// them), e rows, then the fast top-k path's arrays (Layout).
__host__ __device__ inline int64_t c_stride(int vocab) { return (static_cast<int64_t>(vocab) + 3) / 4 * 4; }
__host__ __device__ inline size_t align256(size_t v) { return (v + 255) / 256 * 256; }
__host__ __device__ inline size_t floats_bytes(int rows, int vocab) {
  return align256(static_cast<size_t>(rows) * static_cast<size_t>(c_stride(vocab)) * 4);
}
struct Layout {
  size_t e, ids, row_seq, row_len, block_table, topk_ws, end;
};
__host__ __device__ inline Layout layout(int rows, int vocab) {
  Layout L;
  const size_t R = static_cast<size_t>(rows);
  L.e = floats_bytes(rows, vocab);
  L.ids = L.e + align256(R * static_cast<size_t>(vocab) * 8);
  L.row_seq = L.ids + align256(R * kFastTopK * 4);
  L.row_len = L.row_seq + align256(R * 4);
  L.block_table = L.row_len + align256(R * 4);
  L.topk_ws = L.block_table + 256;
  L.end = L.topk_ws;  // + indexer_topk_workspace_bytes(rows), added on the host
  return L;
}
__device__ RowWork row_work(const SampleParams& p, int row) {
  char* base = static_cast<char*>(p.workspace);
  return {reinterpret_cast<float*>(base) + static_cast<size_t>(row) * c_stride(p.vocab),
          reinterpret_cast<double*>(base + layout(p.num_rows, p.vocab).e) + static_cast<size_t>(row) * p.vocab};
}

// c = penalised logits (greedy) or penalised logits / temperature, with sampler.cpp's float operations,
// into the row's workspace. Block-wide; ends with a barrier.
__device__ void write_scaled_row(const SampleParams& p, int row, const float* l, float* c) {
  const int tid = threadIdx.x, V = p.vocab;
  const bool greedy = !(p.temperature > 0.0f);
  const int w0 = p.window_offsets ? p.window_offsets[row] : 0;
  const int w1 = p.window_offsets ? p.window_offsets[row + 1] : 0;
  for (int i = tid; i < V; i += blockDim.x) c[i] = greedy ? l[i] : __fdiv_rn(l[i], p.temperature);
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

__global__ void __launch_bounds__(kThreads) sample_rows_kernel(const SampleParams p) {
  __shared__ Shared s;
  const int row = blockIdx.x, tid = threadIdx.x, V = p.vocab;
  const float* l = p.logits[row];
  const bool greedy = !(p.temperature > 0.0f);
  const int w0 = p.window_offsets ? p.window_offsets[row] : 0;
  const int w1 = p.window_offsets ? p.window_offsets[row + 1] : 0;
  const bool penalise = p.repetition_penalty != 1.0f && w1 > w0;
  const RowWork work = row_work(p, row);

  // 1. c = penalised logits (greedy) or penalised logits / temperature, with sampler.cpp's float ops.
  const float* c = l;
  if (!greedy || penalise) {
    write_scaled_row(p, row, l, work.c);
    c = work.c;
  }

  // 2. The top key: the greedy token, and max c.
  u64 best = 0;
  for (int i = tid; i < V; i += kThreads) {
    const u64 k = full_key(c[i], i);
    best = k > best ? k : best;
  }
  const u64 top = block_max(best, s);
  const int32_t top_id = key_id(top);
  if (greedy) {
    if (tid == 0) p.out_tokens[row] = top_id;
    return;
  }
  const float mx = c[top_id];

  // 3. top-k cut.
  Filter f;
  f.top = top;
  if (p.top_k > 0 && p.top_k < V) f.lo = select_key(c, V, f, Target::kCount, static_cast<double>(p.top_k), s);

  // 4. exp of the candidates and their sum.
  double local = 0.0;
  for (int i = tid; i < V; i += kThreads) {
    const float v = c[i];
    const double e = full_key(v, i) >= f.lo ? exp(static_cast<double>(__fsub_rn(v, mx))) : 0.0;
    work.e[i] = e;
    local += e;
  }
  const double sum = block_sum(local, s);  // its barriers also publish work.e
  f.by_count = false;
  f.e = work.e;
  f.sum = sum;

  // 5. top-p cut, then the min-p filter.
  if (p.top_p < 1.0f) f.lo = select_key(c, V, f, Target::kAtLeast, static_cast<double>(p.top_p), s);
  if (p.min_p > 0.0f) f.floor = __dmul_rn(static_cast<double>(p.min_p), 1.0 / sum);  // min_p * prob[0]

  // 6. The draw.
  const u64 chosen = select_key(c, V, f, Target::kDraw, p.uniforms[row], s);
  if (tid == 0) p.out_tokens[row] = key_id(chosen);
}

// Fast top-k path, step 1: the scaled rows, and the row layout the indexer's top-k reads (every row is
// "sequence" 0 with one page of `vocab` slots, so a slot is the token id).
__global__ void __launch_bounds__(kThreads) prep_rows_kernel(const SampleParams p) {
  const int row = blockIdx.x;
  write_scaled_row(p, row, p.logits[row], row_work(p, row).c);
  if (threadIdx.x == 0) {
    char* base = static_cast<char*>(p.workspace);
    const Layout L = layout(p.num_rows, p.vocab);
    reinterpret_cast<int32_t*>(base + L.row_seq)[row] = 0;
    reinterpret_cast<int32_t*>(base + L.row_len)[row] = p.vocab;
    if (row == 0) reinterpret_cast<int32_t*>(base + L.block_table)[0] = 0;
  }
}

__device__ __forceinline__ float key_value(u64 key) {
  const uint32_t o = static_cast<uint32_t>(key >> 32);
  return __uint_as_float((o & 0x80000000u) ? (o & 0x7fffffffu) : ~o);
}

// Fast top-k path, step 3: one block per row over its k candidates (the ids the indexer's top-k wrote,
// their values read back from c): sort by key, then sampler.cpp's loops in its order (its sums are sequential, so thread 0 runs
// them; k <= kFastTopK keeps that short).
__global__ void __launch_bounds__(kThreads) finish_topk_kernel(const SampleParams p) {
  __shared__ u64 keys[kFastTopK];
  __shared__ double prob[kFastTopK];
  __shared__ double sum_s;
  const int row = blockIdx.x, tid = threadIdx.x, k = p.top_k;
  const char* base = static_cast<const char*>(p.workspace);
  const Layout L = layout(p.num_rows, p.vocab);
  const int32_t* ids = reinterpret_cast<const int32_t*>(base + L.ids) + static_cast<size_t>(row) * k;  // [rows][k]
  const float* c = row_work(p, row).c;
  int n2 = 1;
  while (n2 < k) n2 <<= 1;
  for (int j = tid; j < n2; j += kThreads) {
    const int32_t id = j < k ? ids[j] : -1;
    keys[j] = (id >= 0 && id < p.vocab) ? full_key(c[id], id) : 0ull;  // padding sorts last
  }
  __syncthreads();
  // Bitonic sort, descending (the final merge has every index in its "descending" half).
  for (int size = 2; size <= n2; size <<= 1) {
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      for (int t = tid; t < n2 / 2; t += kThreads) {
        const int i = 2 * stride * (t / stride) + (t % stride), j = i + stride;
        const bool desc = (i & size) == 0;
        const u64 a = keys[i], b = keys[j];
        if (desc ? a < b : a > b) {
          keys[i] = b;
          keys[j] = a;
        }
      }
      __syncthreads();
    }
  }
  // key_value gives +0.0 for -0.0: c - mx and exp are unchanged by that.
  const float mx = key_value(keys[0]);
  for (int j = tid; j < k; j += kThreads) prob[j] = exp(static_cast<double>(__fsub_rn(key_value(keys[j]), mx)));
  __syncthreads();
  if (tid == 0) {
    double sum = 0;
    for (int j = 0; j < k; ++j) sum += prob[j];
    sum_s = sum;
  }
  __syncthreads();
  for (int j = tid; j < k; j += kThreads) prob[j] /= sum_s;
  __syncthreads();
  if (tid == 0) {
    int keep = k;
    if (p.top_p < 1.0f) {
      double cum = 0;
      int n = 0;
      while (n < keep) {
        cum += prob[n++];
        if (cum >= static_cast<double>(p.top_p)) break;
      }
      keep = n > 1 ? n : 1;
    }
    if (p.min_p > 0.0f) {
      const double floor = __dmul_rn(static_cast<double>(p.min_p), prob[0]);
      int n = 1;
      while (n < keep && prob[n] >= floor) ++n;
      keep = n;
    }
    double total = 0;
    for (int j = 0; j < keep; ++j) total += prob[j];
    const double u = __dmul_rn(p.uniforms[row], total);
    double cum = 0;
    int32_t token = key_id(keys[keep - 1]);
    for (int j = 0; j < keep; ++j) {
      cum += prob[j];
      if (u < cum) {
        token = key_id(keys[j]);
        break;
      }
    }
    p.out_tokens[row] = token;
  }
}

bool fast_topk(const SampleParams& p) {
  return p.temperature > 0.0f && p.top_k > 0 && p.top_k < p.vocab && p.top_k <= kFastTopK &&
         p.num_rows <= 65535;
}

}  // namespace

size_t sample_workspace_bytes(int num_rows, int vocab) {
  if (num_rows <= 0 || vocab <= 0) return 0;
  return layout(num_rows, vocab).end + indexer::indexer_topk_workspace_bytes(num_rows);
}

cudaError_t launch_sample_rows(const SampleParams& p, cudaStream_t stream) {
  if (p.num_rows < 0 || p.vocab <= 0 || p.num_rows > (1 << 24)) return cudaErrorInvalidValue;
  if (p.num_rows == 0) return cudaSuccess;
  if (!p.logits || !p.out_tokens) return cudaErrorInvalidValue;
  if ((p.window_offsets == nullptr) != (p.window == nullptr) && p.window_offsets != nullptr) return cudaErrorInvalidValue;
  if (!(p.repetition_penalty > 0.0f)) return cudaErrorInvalidValue;
  const bool greedy = !(p.temperature > 0.0f);
  if (!greedy && !p.uniforms) return cudaErrorInvalidValue;
  if (!(p.top_p > 0.0f)) return cudaErrorInvalidValue;
  const bool needs_work = !greedy || (p.repetition_penalty != 1.0f && p.window_offsets);
  if (needs_work && (!p.workspace || p.workspace_bytes < sample_workspace_bytes(p.num_rows, p.vocab) ||
                     reinterpret_cast<uintptr_t>(p.workspace) % 16 != 0))
    return cudaErrorInvalidValue;
  if (!fast_topk(p)) {
    sample_rows_kernel<<<p.num_rows, kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  }
  prep_rows_kernel<<<p.num_rows, kThreads, 0, stream>>>(p);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  char* base = static_cast<char*>(p.workspace);
  const Layout L = layout(p.num_rows, p.vocab);
  indexer::TopkParams tp;
  tp.rows.num_rows = p.num_rows;
  tp.rows.row_seq = reinterpret_cast<const int32_t*>(base + L.row_seq);
  tp.rows.row_len = reinterpret_cast<const int32_t*>(base + L.row_len);
  tp.rows.block_tables = reinterpret_cast<const int32_t*>(base + L.block_table);
  tp.rows.block_table_stride = 1;
  tp.rows.page_size = p.vocab;  // one page: slot = position = token id
  tp.rows.max_row_len = p.vocab;
  tp.k = p.top_k;
  tp.scores = reinterpret_cast<const float*>(base);
  tp.score_stride = c_stride(p.vocab);
  tp.out_slots = reinterpret_cast<int32_t*>(base + L.ids);
  tp.workspace = base + L.topk_ws;
  tp.workspace_bytes = indexer::indexer_topk_workspace_bytes(p.num_rows);
  e = indexer::launch_indexer_topk(tp, stream);
  if (e != cudaSuccess) return e;
  finish_topk_kernel<<<p.num_rows, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace glm5rt::kernels::sampling

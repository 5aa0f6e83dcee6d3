// Round 2's general device sampler (everything but the fast top-k path of sampling_topk.cu): the same
// steps and the same exact arithmetic as round 1 (sampling_v1.cu), so it draws the same token, but the
// probability-weighted selects (top-p, the draw) are a single histogram pass over *linear* value bins
// instead of up to eight 8-bit radix levels over the key:
//
//  - Why round 1 was slow (H200: 1.9 ms for the whole vocabulary at temperature 1): the top 8 bits of a
//    float's order key are its sign and exponent, so nearly all 154880 logits of a row fall into 2-3 of
//    the 256 bins of the first levels, and the 64-bit shared-memory atomicAdd is a compare-and-swap loop:
//    32 lanes of 32 warps spinning on the same few words, for several levels and three selects.
//  - Round 2: bin = floor((max - c) * 2048 / range), range = min(48, max - min finite c). That is monotone
//    in c (float subtraction and multiplication round monotonically), so bins are ordered like keys and
//    equal values share a bin; a smooth row spreads over hundreds of bins (a few hundred members per bin
//    for normal logits of any scale). Only members with a non-zero weight are counted (a weight-0 member
//    can never be the first to reach a target >= 1), which is why 48 suffices: exp(-48) is below the
//    2^-62 fixed-point step. One pass builds the histogram (64-bit weights through two native 32-bit
//    atomics, warps whose lanes share a few bins add once per bin), one block-wide scan finds the bin
//    holding the target, a second pass compacts that bin's members (<= 4096) into shared memory, where a
//    bitonic sort by key and a scan of their weights find the key. A bin with more members (heavy ties,
//    a flat or very narrow row) falls back to round 1's radix select with the round-2 atomics: exact,
//    slower.
//  - top_k > 2048 (the only count select left here) uses the same fallback select.
// Shared memory: dynamic, one union of round 1's layout (fallback, reductions) and round 2's (about 88 KB).
#include "kernels/sampling/sampling_common.cuh"

#include <atomic>

namespace glm5rt::kernels::sampling::detail {
namespace {

constexpr int kLinBins = 2048;
constexpr int kLinCap = 4096;
constexpr float kMaxRange = 48.0f;
constexpr int kUnroll = 4;  // loads in flight per thread in the passes over the row
static_assert(kLinBins == 2 * kThreads, "the bin scan gives every thread two bins");
static_assert(kLinCap == 4 * kThreads, "the candidate scan gives every thread four entries");

struct LinShared {
  u64 hist_w[kLinBins];
  unsigned hist_n[kLinBins];
  u64 cand_key[kLinCap];
  u64 cand_w[kLinCap];
  u64 warp_tot[kWarps];
  u64 target, above, result;
  unsigned n_cand, bin_count;
  int bin, no_weight;
};
union Smem {
  Shared r1;
  LinShared lin;
};

// Linear bin of a value (0 = the top). NaN (unspecified rows) goes to the last bin.
struct LinBins {
  float mx, scale;
  __device__ __forceinline__ int operator()(float v) const {
    const float t = __fmul_rn(__fsub_rn(mx, v), scale);
    return t < static_cast<float>(kLinBins) ? static_cast<int>(t) : kLinBins - 1;  // t >= 0: v <= mx
  }
};

// Block-wide inclusive scan of one u64 per thread; returns this thread's inclusive prefix, *total the
// block's sum. Uses warp_tot; starts and ends with a barrier.
__device__ u64 block_scan_u64(u64 v, LinShared& s, u64* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const u64 n = __shfl_up_sync(kFull, v, o);
    if (lane >= o) v += n;
  }
  __syncthreads();
  if (lane == 31) s.warp_tot[warp] = v;
  __syncthreads();
  if (warp == 0) {
    u64 t = s.warp_tot[lane];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const u64 n = __shfl_up_sync(kFull, t, o);
      if (lane >= o) t += n;
    }
    s.warp_tot[lane] = t;  // inclusive over warps
  }
  __syncthreads();
  *total = s.warp_tot[kWarps - 1];
  const u64 r = (warp > 0 ? s.warp_tot[warp - 1] : 0ull) + v;
  __syncthreads();
  return r;
}

// The first member key, in descending key order, at which the cumulative weight reaches
// select_target(how, param, total) (how: kAtLeast or kDraw; f.by_count is false). Equal to round 1's
// select_key on the same arguments.
__device__ u64 linear_select(const float* c, int V, const Filter& f, Target how, double param, LinBins bins, Smem& sm) {
  LinShared& s = sm.lin;
  const AddAggregated add;
  const int tid = threadIdx.x;
  __syncthreads();  // the previous use of the shared memory is over
  for (int b = tid; b < kLinBins; b += kThreads) {
    s.hist_w[b] = 0;
    s.hist_n[b] = 0;
  }
  if (tid == 0) s.n_cand = 0;
  __syncthreads();
  // Pass 1: weights and counts per bin of the members with a non-zero weight. c four loads ahead, then
  // e for the members past the cut (again all in flight together), then the bins.
  for (int base = 0; base < V; base += kUnroll * kThreads) {  // warp-converged: add uses collectives
    float v[kUnroll];
    double ev[kUnroll];
    u64 key[kUnroll];
#pragma unroll
    for (int q = 0; q < kUnroll; ++q) {
      const int i = base + q * kThreads + tid;
      v[q] = i < V ? c[i] : 0.0f;
    }
#pragma unroll
    for (int q = 0; q < kUnroll; ++q) {
      const int i = base + q * kThreads + tid;
      key[q] = full_key(v[q], i);
      ev[q] = i < V && key[q] >= f.lo ? f.e[i] : 0.0;
    }
#pragma unroll
    for (int q = 0; q < kUnroll; ++q) {
      const int i = base + q * kThreads + tid;
      u64 w = 0;
      const bool in = i < V && weight_of_loaded(f, key[q], ev[q], w) && w != 0;
      add(s.hist_w, s.hist_n, in, in ? bins(v[q]) : 0, w);
    }
  }
  __syncthreads();
  // The bin holding the target: thread t owns bins 2t, 2t + 1 (bin 0 is the top).
  const u64 w0 = s.hist_w[2 * tid], w1 = s.hist_w[2 * tid + 1];
  u64 total = 0;
  const u64 incl = block_scan_u64(w0 + w1, s, &total);
  const u64 target = select_target(how, param, total);
  const u64 run = incl - w0 - w1;
  if (tid == 0) s.no_weight = total == 0;
  if (total != 0 && run < target && target <= incl) {
    const int b = run + w0 >= target ? 2 * tid : 2 * tid + 1;
    s.bin = b;
    s.above = b == 2 * tid ? run : run + w0;
    s.bin_count = s.hist_n[b];
  }
  __syncthreads();
  if (s.no_weight) {
    __syncthreads();
    return f.top;  // as round 1 (not reachable with finite logits)
  }
  if (s.bin_count > static_cast<unsigned>(kLinCap)) return select_key<AddAggregated>(c, V, f, how, param, sm.r1);
  // Pass 2: the chosen bin's members into shared memory (the same predicate as pass 1).
  const int chosen = s.bin;
  const u64 rel = target - s.above;  // 1 <= rel <= the bin's weight
  for_each_value<kUnroll>(c, V, [&](bool valid, int i, float v) {  // warp-converged: collectives inside
    u64 key = 0, w = 0;
    // Pass 1's predicate, with the cheap bin test first (weight_of divides in double).
    bool in = false;
    if (valid && bins(v) == chosen) {
      key = full_key(v, i);
      in = weight_of(f, key, i, w) && w != 0;
    }
    const unsigned mask = __ballot_sync(kFull, in);
    if (mask == 0) return;
    const int lane = tid % 32, leader = __ffs(mask) - 1;
    unsigned at = 0;
    if (lane == leader) at = atomicAdd(&s.n_cand, static_cast<unsigned>(__popc(mask)));
    at = __shfl_sync(kFull, at, leader) + __popc(mask & ((1u << lane) - 1));
    if (in && at < static_cast<unsigned>(kLinCap)) {
      s.cand_key[at] = key;
      s.cand_w[at] = w;
    }
  });
  __syncthreads();
  const int n = static_cast<int>(min(s.n_cand, static_cast<unsigned>(kLinCap)));
  int n2 = 1;
  while (n2 < n) n2 <<= 1;
  for (int j = n + tid; j < n2; j += kThreads) {  // padding: key 0 sorts last, weight 0
    s.cand_key[j] = 0;
    s.cand_w[j] = 0;
  }
  __syncthreads();
  bitonic_sort_desc<u64>(s.cand_key, s.cand_w, n2);
  // The first sorted candidate whose cumulative weight reaches rel: thread t owns entries 4t .. 4t + 3.
  u64 cw[4], local = 0;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int j = 4 * tid + q;
    cw[q] = j < n2 ? s.cand_w[j] : 0ull;
    local += cw[q];
  }
  u64 bin_total = 0;
  const u64 cincl = block_scan_u64(local, s, &bin_total);
  u64 crun = cincl - local;
  if (crun < rel && rel <= cincl) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      if (crun < rel && rel <= crun + cw[q]) s.result = s.cand_key[4 * tid + q];
      crun += cw[q];
    }
  }
  __syncthreads();
  const u64 r = s.result;
  __syncthreads();
  return r;
}

__global__ void __launch_bounds__(kThreads) sample_rows_v2_kernel(const SampleParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
  Shared& s = sm.r1;
  const int row = blockIdx.x, tid = threadIdx.x, V = p.vocab;
  const RowSetup setup = row_setup(p, row);
  const float* l = setup.logits;
  const bool greedy = setup.greedy, penalise = setup.penalise;
  const RowWork work = setup.work;

  // 1. c = penalised logits (greedy) or penalised logits / temperature, with sampler.cpp's float ops;
  // 2. the top key (the greedy token, max c) and the smallest finite c (the linear bins' range). Without
  //    a penalty both happen in one pass (c is final as it is written); with one, c is written first.
  const float* c = l;
  u64 best = 0;
  float lo = __int_as_float(0x7f800000);
  const auto visit = [&](float v, int i) {
    const u64 k = full_key(v, i);
    best = k > best ? k : best;
    if (isfinite(v)) lo = fminf(lo, v);
  };
  if (!greedy && !penalise) {
    float* out = work.c;
    for_each_value<kUnroll>(l, V, [&](bool valid, int i, float x) {
      if (!valid) return;
      const float v = __fdiv_rn(x, p.temperature);
      out[i] = v;
      visit(v, i);
    });
    c = work.c;  // published by block_max's barriers
  } else {
    if (penalise) {
      write_scaled_row<kUnroll>(p, row, l, work.c);
      c = work.c;
    }
    for_each_value<kUnroll>(c, V, [&](bool valid, int i, float v) {
      if (valid) visit(v, i);
    });
  }
  const u64 top = block_max(best, s);
  const int32_t top_id = key_id(top);
  if (greedy) {
    if (tid == 0) p.out_tokens[row] = top_id;
    return;
  }
  const float mx = c[top_id];
  const float min_c = block_min(lo, s);
  LinBins bins{mx, 0.0f};
  {
    const float range = fminf(__fsub_rn(mx, min_c), kMaxRange);
    if (range > 0.0f && isfinite(range)) bins.scale = __fdiv_rn(static_cast<float>(kLinBins), range);
    // else every member lands in bin 0: more than kLinCap of them take the fallback
  }

  // 3. top-k cut (top_k > 2048 only; smaller k take the fast path).
  Filter f;
  f.top = top;
  if (p.top_k > 0 && p.top_k < V)
    f.lo = select_key<AddAggregated>(c, V, f, Target::kCount, static_cast<double>(p.top_k), s);

  // 4. exp of the candidates and their sum.
  double local = 0.0;  // the same per-thread order of additions as round 1 (i = tid, tid + kThreads, ...)
  for_each_value<kUnroll>(c, V, [&](bool valid, int i, float v) {
    if (!valid) return;
    const double e = full_key(v, i) >= f.lo ? exp(static_cast<double>(__fsub_rn(v, mx))) : 0.0;
    work.e[i] = e;
    local += e;
  });
  const double sum = block_sum(local, s);  // its barriers also publish work.e
  f.by_count = false;
  f.e = work.e;
  f.sum = sum;

  // 5. top-p cut, then the min-p filter.
  if (p.top_p < 1.0f) f.lo = linear_select(c, V, f, Target::kAtLeast, static_cast<double>(p.top_p), bins, sm);
  if (p.min_p > 0.0f) f.floor = __dmul_rn(static_cast<double>(p.min_p), 1.0 / sum);  // min_p * prob[0]

  // 6. The draw.
  const u64 chosen = linear_select(c, V, f, Target::kDraw, p.uniforms[row], bins, sm);
  if (tid == 0) p.out_tokens[row] = key_id(chosen);
}

}  // namespace

cudaError_t launch_round2(const SampleParams& p, cudaStream_t stream) {
  constexpr size_t kSmem = sizeof(Smem);
  static_assert(kSmem <= 99 * 1024, "SM120 allows at most 99 KB of shared memory per block");
  // Above the 48 KB default: opt in once per device (a function attribute, not a stream operation).
  static std::atomic<unsigned long long> opted_in{0};
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  const unsigned long long bit = dev < 64 ? 1ull << dev : 0ull;
  if (bit == 0 || !(opted_in.load(std::memory_order_relaxed) & bit)) {
    e = cudaFuncSetAttribute(sample_rows_v2_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem));
    if (e != cudaSuccess) return e;
    opted_in.fetch_or(bit, std::memory_order_relaxed);
  }
  sample_rows_v2_kernel<<<p.num_rows, kThreads, kSmem, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace glm5rt::kernels::sampling::detail

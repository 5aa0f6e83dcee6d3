// The lightning indexer, simply: per-token scores of each row against the cached keys of its sequence,
// then an exact top-k by radix select (one block per row).
#include <cub/block/block_scan.cuh>

#include "kernels/common/simple_device.cuh"

namespace glm5k {
namespace {

constexpr int kScoreThreads = 256;
constexpr int kTokensPerBlock = 64;
constexpr int kMaxKeyPerLane = 8;  // index_dim <= 256

__global__ void __launch_bounds__(kScoreThreads) indexer_scores_kernel(IndexerScoreParams p) {
  extern __shared__ float sq[];  // heads * dim query values, then heads weights
  const int32_t r = blockIdx.y, d = p.fmt.index_dim, H = p.heads;
  const float* qi = p.qi + static_cast<int64_t>(r) * H * d;
  for (int32_t i = threadIdx.x; i < H * d; i += blockDim.x) sq[i] = qi[i];
  float* sw = sq + H * d;
  for (int32_t i = threadIdx.x; i < H; i += blockDim.x) sw[i] = p.wts[static_cast<int64_t>(r) * H + i];
  __syncthreads();
  const int32_t pos = p.batch.pos[r], seq = p.batch.seq[r];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  float* out = p.scores + static_cast<int64_t>(r) * p.ctx_cap;
  for (int32_t i = warp; i < kTokensPerBlock; i += nw) {
    const int32_t t = blockIdx.x * kTokensPerBlock + i;
    if (t >= p.ctx_cap) break;
    if (t > pos) {
      if (lane == 0) out[t] = -INFINITY;
      continue;
    }
    const int64_t slot = detail::slot_of(p.batch, seq, t);
    const char* rec = detail::index_vector(p.batch, p.fmt, p.layer, seq, slot);
    const float scale = p.fmt.index_dtype == kRecFp8 ? *detail::index_scale(p.batch, p.fmt, p.layer, seq, slot) : 1.f;
    float key[kMaxKeyPerLane];
#pragma unroll
    for (int j = 0; j < kMaxKeyPerLane; ++j) key[j] = lane + 32 * j < d ? detail::index_value(rec, p.fmt, lane + 32 * j, scale) : 0.f;
    float s = 0.f;
    for (int32_t h = 0; h < H; ++h) {
      float part = 0.f;
#pragma unroll
      for (int j = 0; j < kMaxKeyPerLane; ++j)
        if (lane + 32 * j < d) part += sq[h * d + lane + 32 * j] * key[j];
      const float v = detail::warp_sum(part) * p.dot_scale;
      s += (v > 0.f ? v : 0.f) * sw[h];
    }
    if (lane == 0) out[t] = s;
  }
}

constexpr int kTopkThreads = 512;

// Order-preserving map of float bits to unsigned: a larger float gives a larger key.
__device__ inline uint32_t order_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__global__ void __launch_bounds__(kTopkThreads) topk_kernel(const float* scores, int32_t ctx_cap, const int32_t* pos,
                                                            int32_t k, int32_t* sel, int32_t* n_sel) {
  using Scan = cub::BlockScan<int32_t, kTopkThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int32_t hist[256];
  __shared__ uint32_t s_prefix, s_mask;
  __shared__ int32_t s_remaining, s_carry_eq, s_carry_out;
  const int32_t r = blockIdx.x;
  const int32_t n = min(pos[r] + 1, ctx_cap);
  const float* row = scores + static_cast<int64_t>(r) * ctx_cap;
  int32_t* out = sel + static_cast<int64_t>(r) * k;
  if (n <= k) {
    for (int32_t i = threadIdx.x; i < k; i += blockDim.x) out[i] = i < n ? i : -1;
    if (threadIdx.x == 0) n_sel[r] = n;
    return;
  }
  if (threadIdx.x == 0) {
    s_prefix = 0;
    s_mask = 0;
    s_remaining = k;
  }
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    const uint32_t prefix = s_prefix, mask = s_mask;
    for (int32_t t = threadIdx.x; t < n; t += blockDim.x) {
      const uint32_t u = order_key(row[t]);
      if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int32_t above = 0, b = 255;
      for (; b > 0; --b) {
        if (above + hist[b] >= s_remaining) break;
        above += hist[b];
      }
      s_remaining -= above;
      s_prefix = prefix | (static_cast<uint32_t>(b) << shift);
      s_mask = mask | (255u << shift);
    }
    __syncthreads();
  }
  // s_prefix is the k-th largest key: take every larger key, and the first s_remaining equal keys in
  // position order, writing positions in ascending order.
  const uint32_t thr = s_prefix;
  const int32_t need_eq = s_remaining;
  if (threadIdx.x == 0) {
    s_carry_eq = 0;
    s_carry_out = 0;
  }
  __syncthreads();
  for (int32_t base = 0; base < n; base += blockDim.x) {
    const int32_t t = base + threadIdx.x;
    const uint32_t u = t < n ? order_key(row[t]) : 0u;
    const int32_t eq = (t < n && u == thr) ? 1 : 0;
    int32_t eq_rank, eq_total;
    Scan(scan_tmp).ExclusiveSum(eq, eq_rank, eq_total);
    __syncthreads();
    const int32_t take = (t < n && (u > thr || (eq && s_carry_eq + eq_rank < need_eq))) ? 1 : 0;
    int32_t at, taken;
    Scan(scan_tmp).ExclusiveSum(take, at, taken);
    if (take) out[s_carry_out + at] = t;
    __syncthreads();
    if (threadIdx.x == 0) {
      s_carry_eq += eq_total;
      s_carry_out += taken;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) n_sel[r] = k;
}

}  // namespace

cudaError_t launch_indexer_scores(const IndexerScoreParams& p, cudaStream_t stream) {
  if (p.batch.rows <= 0 || p.ctx_cap <= 0) return cudaSuccess;
  if (p.fmt.index_dim > 32 * kMaxKeyPerLane) return cudaErrorInvalidValue;
  const size_t smem = sizeof(float) * (static_cast<size_t>(p.heads) * p.fmt.index_dim + p.heads);
  if (smem > 48 * 1024) return cudaErrorInvalidValue;
  const dim3 grid((p.ctx_cap + kTokensPerBlock - 1) / kTokensPerBlock, p.batch.rows);
  indexer_scores_kernel<<<grid, kScoreThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_topk_select(const float* scores, int32_t ctx_cap, const int32_t* pos, int32_t rows, int32_t k,
                               int32_t* sel, int32_t* n_sel, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (k <= 0) return cudaErrorInvalidValue;
  topk_kernel<<<rows, kTopkThreads, 0, stream>>>(scores, ctx_cap, pos, k, sel, n_sel);
  return cudaGetLastError();
}

}  // namespace glm5k

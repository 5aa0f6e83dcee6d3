// Token permutation by expert: one block counts the (token, k) assignments per expert, scans the counts
// into group offsets, the list of non-empty groups and the prefill tile prefix, then places each
// assignment. The order of rows inside a group may vary between runs (shared-memory atomics); nothing
// downstream depends on it: every row's GEMM result is independent of its neighbours, and the combine
// reads rows through slot_row in k order.
#include "kernels/gemm/fp8_gemm.h"
#include "kernels/gemm/launch.cuh"
#include "kernels/moe/moe.h"

namespace glm5rt::kernels {
namespace {

constexpr int kPermuteThreads = 1024;
constexpr int kMaxGroups = kRouterMaxExperts + 1;

// Exclusive scan of f(0..n-1) by warp 0 into out[0..n] (out[n] = total). n <= 32 * 9.
template <typename F>
__device__ void warp_scan(int n, F f, int* out) {
  const int lane = threadIdx.x % 32;
  constexpr int kPer = (kMaxGroups + 31) / 32;
  const int begin = lane * kPer;
  int local = 0;
  for (int i = begin; i < begin + kPer && i < n; ++i) local += f(i);
  int incl = local;
#pragma unroll
  for (int m = 1; m < 32; m <<= 1) {
    const int o = __shfl_up_sync(0xffffffffu, incl, m);
    if (lane >= m) incl += o;
  }
  int run = incl - local;
  for (int i = begin; i < begin + kPer && i < n; ++i) {
    out[i] = run;
    run += f(i);
  }
  if (lane == 31) out[n] = incl;
}

__global__ void __launch_bounds__(kPermuteThreads) permute_kernel(const PermuteParams p) {
  detail::pdl_wait_and_release();
  __shared__ int cnt[kMaxGroups];
  __shared__ int offs[kMaxGroups + 1];
  __shared__ int tiles[kMaxGroups + 1];
  __shared__ int act[kMaxGroups + 1];
  const int G = p.num_experts + (p.with_shared ? 1 : 0);
  const int assignments = p.tokens * p.top_k;
  for (int g = threadIdx.x; g < G; g += blockDim.x) cnt[g] = (p.with_shared && g == p.num_experts) ? p.tokens : 0;
  __syncthreads();
  for (int a = threadIdx.x; a < assignments; a += blockDim.x) {
    const int e = p.topk_ids[a];
    if (e >= 0 && e < p.num_experts) atomicAdd(&cnt[e], 1);
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    warp_scan(G, [&](int g) { return cnt[g]; }, offs);
    warp_scan(G, [&](int g) { return (cnt[g] + p.tile_rows - 1) / p.tile_rows; }, tiles);
    warp_scan(G, [&](int g) { return cnt[g] > 0 ? 1 : 0; }, act);
  }
  __syncthreads();
  for (int g = threadIdx.x; g <= G; g += blockDim.x) {
    p.group_offsets[g] = offs[g];
    p.tile_prefix[g] = tiles[g];
    if (g < G && cnt[g] > 0) p.active_groups[act[g]] = g;
  }
  if (threadIdx.x == 0) *p.num_active = act[G];
  __syncthreads();
  // cnt becomes the insertion cursor of each group.
  for (int g = threadIdx.x; g < G; g += blockDim.x) cnt[g] = offs[g];
  __syncthreads();
  for (int a = threadIdx.x; a < assignments; a += blockDim.x) {
    const int e = p.topk_ids[a];
    int row = -1;
    if (e >= 0 && e < p.num_experts) {
      row = atomicAdd(&cnt[e], 1);
      p.row_token[row] = a / p.top_k;
    }
    p.slot_row[a] = row;
  }
  if (p.with_shared)
    for (int t = threadIdx.x; t < p.tokens; t += blockDim.x) p.row_token[offs[p.num_experts] + t] = t;
}

}  // namespace

cudaError_t moe_permute(const PermuteParams& p, cudaStream_t stream) {
  if (p.tokens < 0 || p.top_k < 1 || p.num_experts < 1 || p.num_experts > kRouterMaxExperts || p.tile_rows < 1)
    return cudaErrorInvalidValue;
  if (!p.topk_ids || !p.group_offsets || !p.active_groups || !p.num_active || !p.tile_prefix || !p.row_token ||
      !p.slot_row)
    return cudaErrorInvalidValue;
  return detail::launch(permute_kernel, dim3(1), dim3(kPermuteThreads), 0, stream, p.pdl, p);
}

}  // namespace glm5rt::kernels

// The permutation as a block-wide device function (one block, any multiple of 32 threads): counts the
// (token, k) assignments per expert, scans them into group offsets, the list of non-empty groups and
// the prefill tile prefix, then places each assignment. Shared by moe_permute and the fused front kernel.
// The order of rows inside a group may vary between runs (shared-memory atomics); nothing downstream
// depends on it: every row's GEMM result is independent of its neighbours, and the combine reads rows
// through slot_row in k order.
#pragma once

#include "kernels/moe/moe.h"

namespace glm5rt::kernels::detail {

constexpr int kPermuteMaxGroups = kRouterMaxExperts + 1;

struct PermuteShared {
  int cnt[kPermuteMaxGroups];
  int offs[kPermuteMaxGroups + 1];
  int tiles[kPermuteMaxGroups + 1];
  int act[kPermuteMaxGroups + 1];
};

// Exclusive scan of f(0..n-1) by warp 0 into out[0..n] (out[n] = total). n <= 32 * 9.
template <typename F>
__device__ void permute_warp_scan(int n, F f, int* out) {
  const int lane = threadIdx.x % 32;
  constexpr int kPer = (kPermuteMaxGroups + 31) / 32;
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

// PermuteParams::single_pass: up to this many assignments per thread.
constexpr int kPermuteSinglePassPer = 4;

// The scanned group metadata (offsets, tile prefix, active list and count) from shared memory to the
// outputs, once the block's scans are complete.
__device__ inline void write_group_metadata(const PermuteParams& p, const PermuteShared& sh, int G) {
  for (int g = threadIdx.x; g <= G; g += blockDim.x) {
    p.group_offsets[g] = sh.offs[g];
    p.tile_prefix[g] = sh.tiles[g];
    if (g < G && sh.cnt[g] > 0) p.active_groups[sh.act[g]] = g;
  }
  if (threadIdx.x == 0) *p.num_active = sh.act[G];
}

// The single-pass form (PermuteParams::single_pass; assignments <= kPermuteSinglePassPer * blockDim.x):
// each thread keeps its assignments' experts in registers, the counting atomics also give each one its
// rank inside its group (so no second pass over the ids and no cursor copy), and warp 0 scans counts,
// tiles and the active flags in one pass (three independent shuffle chains side by side instead of three
// scans one after another). 3 block barriers instead of 5. The same outputs as the general form (the
// order of rows inside a group may vary between runs in either form).
__device__ inline void permute_block_single_pass(const PermuteParams& p, PermuteShared& sh, const int* ids) {
  const int G = p.num_experts + (p.with_shared ? 1 : 0);
  const int assignments = p.tokens * p.top_k;
  for (int g = threadIdx.x; g < G; g += blockDim.x) sh.cnt[g] = (p.with_shared && g == p.num_experts) ? p.tokens : 0;
  __syncthreads();  // cnt initialised; and ids written by the caller's block before this call are visible
  int my_e[kPermuteSinglePassPer];
#pragma unroll
  for (int j = 0; j < kPermuteSinglePassPer; ++j) {
    const int a = threadIdx.x + j * blockDim.x;
    my_e[j] = a < assignments ? ids[a] : -1;
  }
  int my_rank[kPermuteSinglePassPer];
#pragma unroll
  for (int j = 0; j < kPermuteSinglePassPer; ++j) {
    const int e = my_e[j];
    my_rank[j] = e >= 0 && e < p.num_experts ? atomicAdd(&sh.cnt[e], 1) : -1;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    constexpr int kPer = (kPermuteMaxGroups + 31) / 32;
    const int begin = lane * kPer;
    int c_loc = 0, t_loc = 0, a_loc = 0;
    for (int i = begin; i < begin + kPer && i < G; ++i) {
      const int c = sh.cnt[i];
      c_loc += c;
      t_loc += (c + p.tile_rows - 1) / p.tile_rows;
      a_loc += c > 0 ? 1 : 0;
    }
    int c_inc = c_loc, t_inc = t_loc, a_inc = a_loc;
#pragma unroll
    for (int m = 1; m < 32; m <<= 1) {
      const int co = __shfl_up_sync(0xffffffffu, c_inc, m);
      const int to = __shfl_up_sync(0xffffffffu, t_inc, m);
      const int ao = __shfl_up_sync(0xffffffffu, a_inc, m);
      if (lane >= m) {
        c_inc += co;
        t_inc += to;
        a_inc += ao;
      }
    }
    int c_run = c_inc - c_loc, t_run = t_inc - t_loc, a_run = a_inc - a_loc;
    for (int i = begin; i < begin + kPer && i < G; ++i) {
      const int c = sh.cnt[i];
      sh.offs[i] = c_run;
      sh.tiles[i] = t_run;
      sh.act[i] = a_run;
      c_run += c;
      t_run += (c + p.tile_rows - 1) / p.tile_rows;
      a_run += c > 0 ? 1 : 0;
    }
    if (lane == 31) {
      sh.offs[G] = c_inc;
      sh.tiles[G] = t_inc;
      sh.act[G] = a_inc;
    }
  }
  __syncthreads();
  write_group_metadata(p, sh, G);
#pragma unroll
  for (int j = 0; j < kPermuteSinglePassPer; ++j) {
    const int a = threadIdx.x + j * blockDim.x;
    if (a < assignments) {
      int row = -1;
      if (my_rank[j] >= 0) {
        row = sh.offs[my_e[j]] + my_rank[j];
        p.row_token[row] = a / p.top_k;
      }
      p.slot_row[a] = row;
    }
  }
  if (p.with_shared)
    for (int t = threadIdx.x; t < p.tokens; t += blockDim.x) p.row_token[sh.offs[p.num_experts] + t] = t;
}

// Every thread of the block calls it (it synchronises the block). ids: where to read the (token, k) ids
// (p.topk_ids, or the same values in shared memory, e.g. from the fused front's selection).
__device__ inline void permute_block(const PermuteParams& p, PermuteShared& sh, const int* ids = nullptr) {
  if (!ids) ids = p.topk_ids;
  if (p.single_pass && p.tokens * p.top_k <= kPermuteSinglePassPer * static_cast<int>(blockDim.x)) {
    permute_block_single_pass(p, sh, ids);
    return;
  }
  const int G = p.num_experts + (p.with_shared ? 1 : 0);
  const int assignments = p.tokens * p.top_k;
  for (int g = threadIdx.x; g < G; g += blockDim.x) sh.cnt[g] = (p.with_shared && g == p.num_experts) ? p.tokens : 0;
  __syncthreads();
  for (int a = threadIdx.x; a < assignments; a += blockDim.x) {
    const int e = ids[a];
    if (e >= 0 && e < p.num_experts) atomicAdd(&sh.cnt[e], 1);
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    permute_warp_scan(G, [&](int g) { return sh.cnt[g]; }, sh.offs);
    permute_warp_scan(G, [&](int g) { return (sh.cnt[g] + p.tile_rows - 1) / p.tile_rows; }, sh.tiles);
    permute_warp_scan(G, [&](int g) { return sh.cnt[g] > 0 ? 1 : 0; }, sh.act);
  }
  __syncthreads();
  write_group_metadata(p, sh, G);
  __syncthreads();
  // cnt becomes the insertion cursor of each group.
  for (int g = threadIdx.x; g < G; g += blockDim.x) sh.cnt[g] = sh.offs[g];
  __syncthreads();
  for (int a = threadIdx.x; a < assignments; a += blockDim.x) {
    const int e = ids[a];
    int row = -1;
    if (e >= 0 && e < p.num_experts) {
      row = atomicAdd(&sh.cnt[e], 1);
      p.row_token[row] = a / p.top_k;
    }
    p.slot_row[a] = row;
  }
  if (p.with_shared)
    for (int t = threadIdx.x; t < p.tokens; t += blockDim.x) p.row_token[sh.offs[p.num_experts] + t] = t;
}

}  // namespace glm5rt::kernels::detail

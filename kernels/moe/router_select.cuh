// Per-token expert selection by one warp (GLM5.md step 9 after the logits): sigmoid, correction bias,
// group scores, top_k by c with deterministic ties (lower expert id wins), weight normalisation and
// scaling. Shared by the router's select kernel and the fused small-batch front kernel (moe_front.cu).
#pragma once

#include <climits>

#include "kernels/moe/moe.h"
#include "kernels/moe/router_math.h"

namespace glm5rt::kernels::detail {

__device__ __forceinline__ bool router_better(float v, int e, float bv, int be) {
  return v > bv || (v == bv && e < be);
}
__device__ __forceinline__ void router_warp_argmax(float& v, int& e) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, m);
    const int oe = __shfl_xor_sync(0xffffffffu, e, m);
    if (router_better(ov, oe, v, e)) { v = ov; e = oe; }
  }
}

constexpr int kRouterPerLane = kRouterMaxExperts / 32;

// Token t's experts from p.logits into p.topk_ids / p.topk_weights. The whole warp calls it; c_sh is the
// warp's own [kRouterMaxExperts] floats of shared memory.
// kCompact: the top-k rounds (and the group rounds) as loops instead of fully unrolled: the same
// operations in the same order (the same bits), ~16x less code. A kernel that runs once per step on a
// cold SM fetches its instructions from L2 / DRAM; the unrolled form made the fused front kernel 111 KB
// of SASS, and the H200 timeline (round 5) showed it taking ~15 us for a few hundred instructions' work.
template <bool kCompact = false>
__device__ __forceinline__ void router_select_token(const RouterParams& p, int t, float* c_sh) {
  const int lane = threadIdx.x % 32;
  const float* lg = p.logits + static_cast<size_t>(t) * p.num_experts;
  float s[kRouterPerLane], c[kRouterPerLane];
#pragma unroll
  for (int j = 0; j < kRouterPerLane; ++j) {
    const int e = lane + 32 * j;
    s[j] = 0.f;
    c[j] = -INFINITY;
    if (e < p.num_experts) {
      s[j] = router_math::sigmoid(lg[e]);
      c[j] = __fadd_rn(s[j], p.bias[e]);
      c_sh[e] = c[j];
    }
  }
  __syncwarp();
  const int gs = p.num_experts / p.n_group;
  uint32_t keep = 0xffffffffu;
  if (p.n_group > 1) {
    float gscore = -INFINITY;
    if (lane < p.n_group) {
      float top1 = -INFINITY, top2 = -INFINITY;
      for (int e = lane * gs; e < (lane + 1) * gs; ++e) {
        const float v = c_sh[e];
        if (v > top1) { top2 = top1; top1 = v; } else if (v > top2) { top2 = v; }
      }
      gscore = __fadd_rn(top1, top2);
    }
    keep = 0;
    for (int r = 0; r < p.topk_group; ++r) {
      float v = (lane < p.n_group && !((keep >> lane) & 1u)) ? gscore : -INFINITY;
      int e = (lane < p.n_group && !((keep >> lane) & 1u)) ? lane : INT_MAX;
      if (v != v) v = -INFINITY;
      router_warp_argmax(v, e);
      if (e < 32) keep |= 1u << e;
    }
  }
  __syncwarp();  // c_sh may be reused by the warp's next token
  // Candidates: c in kept groups, 0.0 elsewhere (transformers' masked_fill); NaN never wins.
  float cand[kRouterPerLane];
#pragma unroll
  for (int j = 0; j < kRouterPerLane; ++j) {
    const int e = lane + 32 * j;
    float v = c[j];
    if (e < p.num_experts && !((keep >> (e / gs)) & 1u)) v = 0.0f;
    if (v != v) v = -INFINITY;
    cand[j] = v;
  }
  uint32_t taken = 0;  // bit j: this lane's expert lane + 32 j already chosen
  int ids[kRouterMaxTopK];
  float wts[kRouterMaxTopK];
  auto round = [&](int r) {
    ids[r] = -1;
    wts[r] = 0.f;
    if (r >= p.top_k) return;
    float bv = -INFINITY;
    int be = INT_MAX;
#pragma unroll
    for (int j = 0; j < kRouterPerLane; ++j) {
      const int e = lane + 32 * j;
      if (e < p.num_experts && !((taken >> j) & 1u) && router_better(cand[j], e, bv, be)) { bv = cand[j]; be = e; }
    }
    router_warp_argmax(bv, be);
    ids[r] = be;
    if ((be & 31) == lane) taken |= 1u << (be / 32);
    // The sigmoid score of the winner, from its owning lane.
    float sv = 0.f;
#pragma unroll
    for (int j = 0; j < kRouterPerLane; ++j)
      if (lane + 32 * j == be) sv = s[j];
    wts[r] = __shfl_sync(0xffffffffu, sv, be & 31);
  };
  if constexpr (kCompact) {
#pragma unroll 1
    for (int r = 0; r < kRouterMaxTopK; ++r) round(r);
  } else {
#pragma unroll
    for (int r = 0; r < kRouterMaxTopK; ++r) round(r);
  }
  if (lane == 0) {
    float denom = 1.0f;
    if (p.norm_topk_prob) {
      float sum = 0.f;
      for (int r = 0; r < p.top_k; ++r) sum = __fadd_rn(sum, wts[r]);
      denom = __fadd_rn(sum, 1e-20f);
    }
    for (int r = 0; r < p.top_k; ++r) {
      float w = wts[r];
      if (p.norm_topk_prob) w = __fdiv_rn(w, denom);
      p.topk_ids[static_cast<size_t>(t) * p.top_k + r] = ids[r];
      p.topk_weights[static_cast<size_t>(t) * p.top_k + r] = __fmul_rn(w, p.routed_scaling_factor);
    }
  }
}

}  // namespace glm5rt::kernels::detail

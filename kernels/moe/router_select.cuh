// Per-token expert selection by one warp (GLM5.md step 9 after the logits): sigmoid, correction bias,
// group scores, top_k by c with deterministic ties (lower expert id wins), weight normalisation and
// scaling. Shared by the router's select kernel and the fused small-batch front kernel (moe_front.cu).
#pragma once

#include <climits>

#include "kernels/gemm/launch.cuh"
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

// The groups a token keeps (bit g of the result): lane g < n_group scores group g as the sum of its two
// largest c (c_sh: the warp's c of every expert, gs experts a group), then topk_group warp argmax rounds
// over the scores not yet kept (lower group wins ties; NaN never wins). The whole warp calls it.
__device__ __forceinline__ uint32_t router_keep_groups(const RouterParams& p, const float* c_sh, int gs, int lane) {
  float gscore = -INFINITY;
  if (lane < p.n_group) {
    float top1 = -INFINITY, top2 = -INFINITY;
    for (int e = lane * gs; e < (lane + 1) * gs; ++e) {
      const float v = c_sh[e];
      if (v > top1) { top2 = top1; top1 = v; } else if (v > top2) { top2 = v; }
    }
    gscore = __fadd_rn(top1, top2);
  }
  uint32_t keep = 0;
  for (int r = 0; r < p.topk_group; ++r) {
    float v = (lane < p.n_group && !((keep >> lane) & 1u)) ? gscore : -INFINITY;
    int e = (lane < p.n_group && !((keep >> lane) & 1u)) ? lane : INT_MAX;
    if (v != v) v = -INFINITY;
    router_warp_argmax(v, e);
    if (e < 32) keep |= 1u << e;
  }
  return keep;
}

// Token t's experts from p.logits into p.topk_ids / p.topk_weights. The whole warp calls it; c_sh is the
// warp's own [kRouterMaxExperts] floats of shared memory.
// kCompact: the top-k rounds (and the group rounds) as loops instead of fully unrolled: the same
// operations in the same order (the same bits), ~16x less code. A kernel that runs once per step on a
// cold SM fetches its instructions from L2 / DRAM; the unrolled form made the fused front kernel 111 KB
// of SASS, and the H200 timeline (round 5) showed it taking ~15 us for a few hundred instructions' work.
// phases (timeline, benchmarks; null: off): lane 0 stamps the start pair once the logits and bias are
// loaded (s, c computed), the waited pair after the group and top-k rounds, the end pair after the writes.
template <bool kCompact = false>
__device__ __forceinline__ void router_select_token(const RouterParams& p, int t, float* c_sh,
                                                    unsigned long long* phases = nullptr) {
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
  if (lane == 0) stamp(phases, kStampStart);
  const int gs = p.num_experts / p.n_group;
  uint32_t keep = 0xffffffffu;
  if (p.n_group > 1) {
    keep = router_keep_groups(p, c_sh, gs, lane);
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
  if (lane == 0) stamp(phases, kStampWaited);
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
    stamp(phases, kStampEnd);
  }
}

// RouterParams::fast_select: the same selection, the same bits, shorter dependency chains (round 6: the
// H200 timeline of the compact form at T=1 put 4.1 us between the front's wait and the end of the
// logits / bias loads, 3.3 us in the 8 rounds and 0.8 us in the writes):
// - every logits and bias load of the lane is issued before any use (in the other forms each sigmoid's
//   IEEE division, whose slow path is a branch, sits between consecutive loads, so they go one by one);
// - each round is a lane-local best, then two warp reductions (redux.sync): the largest value as an
//   order-preserving unsigned key (-0.0 taken as +0.0, so that equal floats give equal keys), then the
//   smallest expert id among the lanes holding that value: the same winner as router_better's argmax
//   (larger c, then lower id) in 2 reductions instead of 5 pairs of shuffles;
// - round r's id and weight stay in lane r's registers (no local-memory arrays); the normalisation sums
//   the weights in round order, as the other forms do, and lane r writes entry r.
__device__ __forceinline__ unsigned router_order_key(float v) {
  const unsigned b = __float_as_uint(__fadd_rn(v, 0.0f));  // -0.0 -> +0.0 (round to nearest); no NaN here
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// ids_sh (optional): entry t * top_k + r also gets round r's id (e.g. shared memory for the permutation).
__device__ __forceinline__ void router_select_token_fast(const RouterParams& p, int t, float* c_sh,
                                                         unsigned long long* phases = nullptr,
                                                         int* ids_sh = nullptr) {
  const int lane = threadIdx.x % 32;
  const float* lg = p.logits + static_cast<size_t>(t) * p.num_experts;
  float lv[kRouterPerLane], bv[kRouterPerLane];
#pragma unroll
  for (int j = 0; j < kRouterPerLane; ++j) {
    const int e = lane + 32 * j;
    lv[j] = e < p.num_experts ? lg[e] : 0.f;
    bv[j] = e < p.num_experts ? __ldg(p.bias + e) : 0.f;
  }
  float s[kRouterPerLane], c[kRouterPerLane];
#pragma unroll
  for (int j = 0; j < kRouterPerLane; ++j) {
    const int e = lane + 32 * j;
    s[j] = 0.f;
    c[j] = -INFINITY;
    if (e < p.num_experts) {
      s[j] = router_math::sigmoid(lv[j]);
      c[j] = __fadd_rn(s[j], bv[j]);
    }
  }
  if (phases) {  // timeline only: the stamp after every c is computed (empty asm statements keep the order)
#pragma unroll
    for (int j = 0; j < kRouterPerLane; ++j) asm volatile("" ::"f"(c[j]));
    if (lane == 0) stamp(phases, kStampStart);
  }
  uint32_t keep = 0xffffffffu;
  int gs = p.num_experts;
  if (p.n_group > 1) {  // as router_select_token (c through shared memory for the per-group scan)
    gs = p.num_experts / p.n_group;
#pragma unroll
    for (int j = 0; j < kRouterPerLane; ++j)
      if (lane + 32 * j < p.num_experts) c_sh[lane + 32 * j] = c[j];
    __syncwarp();
    keep = router_keep_groups(p, c_sh, gs, lane);
    __syncwarp();  // c_sh may be reused by the warp's next token
  }
  float cand[kRouterPerLane];
#pragma unroll
  for (int j = 0; j < kRouterPerLane; ++j) {
    const int e = lane + 32 * j;
    float v = c[j];
    if (p.n_group > 1 && e < p.num_experts && !((keep >> (e / gs)) & 1u)) v = 0.0f;
    if (v != v) v = -INFINITY;
    cand[j] = v;
  }
  uint32_t taken = 0;
  int my_id = -1;     // lane r: round r's expert
  float my_w = 0.f;   // lane r: round r's sigmoid score
#pragma unroll 1
  for (int r = 0; r < p.top_k; ++r) {
    float best = -INFINITY;
    int be = INT_MAX;
    float bs = 0.f;
#pragma unroll
    for (int j = 0; j < kRouterPerLane; ++j) {
      const int e = lane + 32 * j;
      if (e < p.num_experts && !((taken >> j) & 1u) && router_better(cand[j], e, best, be)) {
        best = cand[j];
        be = e;
        bs = s[j];
      }
    }
    const unsigned kmax = __reduce_max_sync(0xffffffffu, router_order_key(best));
    const unsigned win = __reduce_min_sync(0xffffffffu, router_order_key(best) == kmax ? static_cast<unsigned>(be)
                                                                                       : 0xffffffffu);
    const int we = static_cast<int>(win);
    // The winner's lane owns it (be == we there); its score reaches lane r.
    const float ws = __shfl_sync(0xffffffffu, bs, we & 31);
    if ((we & 31) == lane) taken |= 1u << (we / 32);
    if (lane == r) {
      my_id = we;
      my_w = ws;
    }
  }
  if (lane == 0) stamp(phases, kStampWaited);
  float denom = 1.0f;
  if (p.norm_topk_prob) {
    float sum = 0.f;
    for (int r = 0; r < p.top_k; ++r) sum = __fadd_rn(sum, __shfl_sync(0xffffffffu, my_w, r));
    denom = __fadd_rn(sum, 1e-20f);
  }
  if (lane < p.top_k) {
    float w = my_w;
    if (p.norm_topk_prob) w = __fdiv_rn(w, denom);
    p.topk_ids[static_cast<size_t>(t) * p.top_k + lane] = my_id;
    if (ids_sh) ids_sh[t * p.top_k + lane] = my_id;
    p.topk_weights[static_cast<size_t>(t) * p.top_k + lane] = __fmul_rn(w, p.routed_scaling_factor);
  }
  if (lane == 0) stamp(phases, kStampEnd);
}

}  // namespace glm5rt::kernels::detail

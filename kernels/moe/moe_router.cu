// Router: float32 logits in router_math's fixed order, then per-token sigmoid / bias / group / top-k
// selection by one warp per token with deterministic ties (lower expert id wins).
#include <climits>

#include "kernels/gemm/launch.cuh"
#include "kernels/moe/moe.h"
#include "kernels/moe/router_math.h"

namespace glm5rt::kernels {
namespace {

constexpr int kLogitWarps = 8;

// Block: 8 warps; warp w computes experts (blockIdx.y * 8 + w) * EPW + i for TOK tokens.
template <int TOK, int EPW>
__global__ void __launch_bounds__(kLogitWarps * 32) router_logits_kernel(const RouterParams p) {
  detail::pdl_wait_and_release();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int e0 = (blockIdx.y * kLogitWarps + warp) * EPW;
  const int t0 = blockIdx.x * TOK;
  if (e0 >= p.num_experts) return;
  float acc[EPW][TOK];
#pragma unroll
  for (int i = 0; i < EPW; ++i)
#pragma unroll
    for (int t = 0; t < TOK; ++t) acc[i][t] = 0.f;
  const int chunks = p.hidden / 8;
  // Unrolled so that several 16-byte loads per lane are in flight (the order of the fma chain per lane is
  // unchanged: unrolling does not reassociate).
#pragma unroll 6
  for (int ch = lane; ch < chunks; ch += 32) {
    float xf[TOK][8];
#pragma unroll
    for (int t = 0; t < TOK; ++t) {
      uint4 v = make_uint4(0, 0, 0, 0);
      if (t0 + t < p.tokens)
        v = __ldg(reinterpret_cast<const uint4*>(p.x + static_cast<size_t>(t0 + t) * p.ldx) + ch);
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        xf[t][2 * j] = __low2float(h[j]);
        xf[t][2 * j + 1] = __high2float(h[j]);
      }
    }
#pragma unroll
    for (int i = 0; i < EPW; ++i) {
      if (e0 + i >= p.num_experts) break;
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(p.weight + static_cast<size_t>(e0 + i) * p.hidden) + ch);
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
      float wf[8];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        wf[2 * j] = __low2float(h[j]);
        wf[2 * j + 1] = __high2float(h[j]);
      }
#pragma unroll
      for (int t = 0; t < TOK; ++t)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][t] = __fmaf_rn(xf[t][j], wf[j], acc[i][t]);
    }
  }
#pragma unroll
  for (int i = 0; i < EPW; ++i)
#pragma unroll
    for (int t = 0; t < TOK; ++t) {
      float v = acc[i][t];
#pragma unroll
      for (int m = 16; m > 0; m >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, m));
      if (lane == 0 && e0 + i < p.num_experts && t0 + t < p.tokens)
        p.logits[static_cast<size_t>(t0 + t) * p.num_experts + e0 + i] = v;
    }
}

__device__ __forceinline__ bool better(float v, int e, float bv, int be) {
  return v > bv || (v == bv && e < be);
}
__device__ __forceinline__ void warp_argmax(float& v, int& e) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, m);
    const int oe = __shfl_xor_sync(0xffffffffu, e, m);
    if (better(ov, oe, v, e)) { v = ov; e = oe; }
  }
}

constexpr int kSelectWarps = 8;
constexpr int kPerLane = kRouterMaxExperts / 32;

__global__ void __launch_bounds__(kSelectWarps * 32) router_select_kernel(const RouterParams p) {
  detail::pdl_wait_and_release();
  __shared__ float c_sh[kSelectWarps][kRouterMaxExperts];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int t = blockIdx.x * kSelectWarps + warp;
  if (t >= p.tokens) return;
  const float* lg = p.logits + static_cast<size_t>(t) * p.num_experts;
  float s[kPerLane], c[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    s[j] = 0.f;
    c[j] = -INFINITY;
    if (e < p.num_experts) {
      s[j] = router_math::sigmoid(lg[e]);
      c[j] = __fadd_rn(s[j], p.bias[e]);
      c_sh[warp][e] = c[j];
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
        const float v = c_sh[warp][e];
        if (v > top1) { top2 = top1; top1 = v; } else if (v > top2) { top2 = v; }
      }
      gscore = __fadd_rn(top1, top2);
    }
    keep = 0;
    for (int r = 0; r < p.topk_group; ++r) {
      float v = (lane < p.n_group && !((keep >> lane) & 1u)) ? gscore : -INFINITY;
      int e = (lane < p.n_group && !((keep >> lane) & 1u)) ? lane : INT_MAX;
      if (v != v) v = -INFINITY;
      warp_argmax(v, e);
      if (e < 32) keep |= 1u << e;
    }
  }
  // Candidates: c in kept groups, 0.0 elsewhere (transformers' masked_fill); NaN never wins.
  float cand[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    float v = c[j];
    if (e < p.num_experts && !((keep >> (e / gs)) & 1u)) v = 0.0f;
    if (v != v) v = -INFINITY;
    cand[j] = v;
  }
  uint32_t taken = 0;  // bit j: this lane's expert lane + 32 j already chosen
  int ids[kRouterMaxTopK];
  float wts[kRouterMaxTopK];
#pragma unroll
  for (int r = 0; r < kRouterMaxTopK; ++r) {
    ids[r] = -1;
    wts[r] = 0.f;
    if (r >= p.top_k) continue;
    float bv = -INFINITY;
    int be = INT_MAX;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      if (e < p.num_experts && !((taken >> j) & 1u) && better(cand[j], e, bv, be)) { bv = cand[j]; be = e; }
    }
    warp_argmax(bv, be);
    ids[r] = be;
    if ((be & 31) == lane) taken |= 1u << (be / 32);
    // The sigmoid score of the winner, from its owning lane.
    float sv = 0.f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (lane + 32 * j == be) sv = s[j];
    wts[r] = __shfl_sync(0xffffffffu, sv, be & 31);
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

}  // namespace

cudaError_t moe_route(const RouterParams& p, cudaStream_t stream) {
  if (p.tokens < 0 || p.hidden <= 0 || p.hidden % 8 != 0 || p.num_experts < 1 ||
      p.num_experts > kRouterMaxExperts || p.top_k < 1 || p.top_k > kRouterMaxTopK || p.top_k > p.num_experts ||
      p.n_group < 1 || p.n_group > kRouterMaxGroups || p.num_experts % p.n_group != 0 || p.topk_group < 1 ||
      p.topk_group > p.n_group || (p.n_group > 1 && p.num_experts / p.n_group < 2) || p.ldx < p.hidden ||
      p.ldx % 8 != 0)
    return cudaErrorInvalidValue;
  if (p.tokens == 0) return cudaSuccess;
  if (!p.x || !p.weight || !p.bias || !p.logits || !p.topk_ids || !p.topk_weights) return cudaErrorInvalidValue;
  // Few tokens: one expert per warp so that the 3 MB gate weight is spread over many SMs.
  // Many tokens: 4 experts x 8 tokens per warp to cut the gate weight's re-reads from L2.
  if (p.tokens <= 16) {
    constexpr int TOK = 4, EPW = 1;
    const dim3 grid((p.tokens + TOK - 1) / TOK, (p.num_experts + kLogitWarps * EPW - 1) / (kLogitWarps * EPW));
    if (cudaError_t e = detail::launch(router_logits_kernel<TOK, EPW>, grid, dim3(kLogitWarps * 32), 0, stream, p.pdl, p);
        e != cudaSuccess)
      return e;
  } else {
    constexpr int TOK = 8, EPW = 4;
    const dim3 grid((p.tokens + TOK - 1) / TOK, (p.num_experts + kLogitWarps * EPW - 1) / (kLogitWarps * EPW));
    if (cudaError_t e = detail::launch(router_logits_kernel<TOK, EPW>, grid, dim3(kLogitWarps * 32), 0, stream, p.pdl, p);
        e != cudaSuccess)
      return e;
  }
  return detail::launch(router_select_kernel, dim3((p.tokens + kSelectWarps - 1) / kSelectWarps),
                        dim3(kSelectWarps * 32), 0, stream, p.pdl, p);
}

}  // namespace glm5rt::kernels

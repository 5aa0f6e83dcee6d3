// The MoE front (expert selection + permutation + counter zeroing) run by the last block of the few-token
// router logits kernel (MoeParams::fused_router_front): one kernel boundary less between the logits and
// the gate_up GEMM. The same selection (router_select.cuh) and permutation (permute_block.cuh) code as the
// fused front kernel (moe_front.cu), so the same bits; only the block that runs it differs (the logits
// kernel's 2 warps instead of the front's 32: at decode sizes the front is latency, not work).
#pragma once

#include "kernels/gemm/launch.cuh"
#include "kernels/moe/moe_internal.h"
#include "kernels/moe/permute_block.cuh"
#include "kernels/moe/router_select.cuh"

namespace glm5rt::kernels::detail {

// Dynamic shared memory the tail uses (it reuses the logits kernel's staged-x area, which the last block
// no longer reads): the permutation's arrays, every token's logits, one 256-float scratch row per warp
// (the selection's c), the ids handed to the permutation.
__host__ __device__ constexpr size_t router_front_tail_smem(int tokens, int num_experts, int top_k, int warps) {
  return sizeof(PermuteShared) + sizeof(float) * (static_cast<size_t>(tokens) * num_experts +
                                                  static_cast<size_t>(warps) * kRouterMaxExperts) +
         sizeof(int) * static_cast<size_t>(tokens) * top_k;
}

// Every thread of every block calls it once its block's logits are written. True in the last block to
// arrive only. The ticket is zero before the launch; atomicInc with limit n - 1 wraps it back to zero at
// the n-th arrival, so the last block leaves it ready for the next launch (of any grid size). The
// writers' fences before the ticket and the last block's fence after it are the CUDA programming guide's
// last-block pattern (__threadfence section); the logits are then read through L2 (router_front_tail).
__device__ __forceinline__ bool router_last_block(unsigned int* ticket) {
  __threadfence();
  __syncthreads();
  const unsigned int n = gridDim.x * gridDim.y;
  const bool last = __syncthreads_or(threadIdx.x == 0 && atomicInc(ticket, n - 1) == n - 1) != 0;
  if (last) __threadfence();
  return last;
}

// The front's work in one block of any multiple of 32 threads; smem: router_front_tail_smem bytes.
// p: the router's parameters (p.logits written by every block of the grid, p.topk_ids / p.topk_weights
// out); f.pp: the permutation (f.pp.topk_ids == p.topk_ids). Not inlined: only the last block runs it,
// and inlined it would add to the logits loop's register allocation (sm_90: 16 bytes of spill stores in
// the 2-token kernel).
__device__ __noinline__ void router_front_tail(const RouterParams& p, const RouterFrontFusion& f, uint8_t* smem) {
  unsigned long long* const stamps = p.debug_stamps ? p.debug_stamps + static_cast<size_t>(kMoeStampFront) * kStampWords
                                                    : nullptr;
  unsigned long long* const phases =
      p.debug_stamps ? p.debug_stamps + static_cast<size_t>(kMoeStampFrontPhases) * kStampWords : nullptr;
  if (threadIdx.x == 0) {
    stamp(stamps, kStampStart);
    stamp(stamps, kStampWaited);
  }
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32;
  PermuteShared& sh = *reinterpret_cast<PermuteShared*>(smem);
  float* const lg_sh = reinterpret_cast<float*>(smem + sizeof(PermuteShared));
  float* const c_sh = lg_sh + p.tokens * p.num_experts;
  int* const ids_sh = reinterpret_cast<int*>(c_sh + warps * kRouterMaxExperts);
  // Counters of the down GEMM's fused combine, as the front kernel zeroes them (the down GEMM runs after
  // this grid has completed).
  for (int i = threadIdx.x; i < f.n_zero; i += blockDim.x) f.zero_ints[i] = 0;
  // Every token's logits, written by the other blocks: through L2 (ld.global.cg), never from a line this
  // SM's L1 may hold from an earlier launch, into shared memory, where the selection reads them.
  const int n_logits = p.tokens * p.num_experts;
  for (int i = threadIdx.x; i < n_logits; i += blockDim.x) lg_sh[i] = __ldcg(p.logits + i);
  __syncthreads();
  RouterParams q = p;
  q.logits = lg_sh;
  const bool ids_shared = p.fast_select && p.top_k == f.pp.top_k;
  for (int t = warp; t < p.tokens; t += warps) {
    unsigned long long* const sel_phases =
        t == 0 && p.debug_stamps ? p.debug_stamps + static_cast<size_t>(kMoeStampSelectPhases) * kStampWords : nullptr;
    if (p.fast_select)
      router_select_token_fast(q, t, c_sh + warp * kRouterMaxExperts, sel_phases, ids_shared ? ids_sh : nullptr);
    else
      router_select_token<true>(q, t, c_sh + warp * kRouterMaxExperts, sel_phases);
  }
  if (threadIdx.x == 0) stamp(phases, kStampStart);
  // The ids written above (global memory, by lane 0 of each token's warp; or ids_sh) are visible to the
  // whole block after the barrier at the start of permute_block.
  __syncthreads();
  if (threadIdx.x == 0) stamp(phases, kStampWaited);
  permute_block(f.pp, sh, ids_shared ? ids_sh : nullptr);
  if (threadIdx.x == 0) stamp(stamps, kStampEnd);
}

}  // namespace glm5rt::kernels::detail

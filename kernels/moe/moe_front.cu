// The MoE block's front for a handful of tokens, fused into one single-block kernel: expert selection
// (router_select.cuh, one warp per token), per-token-group FP8 quantisation of x (independent of the
// routing, done by the same warps), then the permutation (permute_block.cuh). At decode sizes the three
// separate kernels cost launch and dependency latency, not work; here they cost one launch.
#include "kernels/gemm/fp8_common.cuh"
#include "kernels/gemm/fp8_gemm.h"
#include "kernels/gemm/launch.cuh"
#include "kernels/moe/moe_internal.h"
#include "kernels/moe/permute_block.cuh"
#include "kernels/moe/router_select.cuh"

namespace glm5rt::kernels {
namespace {

constexpr int kFrontWarps = 32;

// kCompact (kMoeFrontCompact): the selection's top-k rounds as a loop (router_select_token<true>), ~16x
// less code for a kernel that runs once per step from a cold instruction cache. flags: kMoeFrontNoQuantize
// (x was quantised elsewhere, e.g. by the router logits kernel).
template <bool kCompact>
__global__ void __launch_bounds__(kFrontWarps * 32) moe_front_kernel(const RouterParams rp, bool select,
                                                                     const PermuteParams pp, uint8_t* xq,
                                                                     float* xs, int* zero_ints,
                                                                     int n_zero, int flags) {
  unsigned long long* const stamps = rp.debug_stamps ? rp.debug_stamps + detail::kStampWords : nullptr;
  // Phases (timeline only): select done (warp 0), past the barrier before the permutation.
  unsigned long long* const phases =
      rp.debug_stamps ? rp.debug_stamps + static_cast<size_t>(kMoeStampFrontPhases) * detail::kStampWords : nullptr;
  if (threadIdx.x == 0) detail::stamp(stamps, detail::kStampStart);
  detail::pdl_wait_and_release();
  if (threadIdx.x == 0) detail::stamp(stamps, detail::kStampWaited);
  // Counters of the down GEMM's fused combine (moe_forward's decode fusion): zero before the down GEMM,
  // which runs after this kernel has completed (gate_up and SwiGLU wait for their predecessors).
  for (int i = threadIdx.x; i < n_zero; i += blockDim.x) zero_ints[i] = 0;
  __shared__ float c_sh[kFrontWarps][kRouterMaxExperts];
  __shared__ detail::PermuteShared sh;
  // With the fast selection, the ids also go to the permutation through shared memory (not read back
  // from global memory after the barrier).
  __shared__ int ids_sh[kMoeFrontMaxTokens * kRouterMaxTopK];
  const bool ids_shared = select && rp.fast_select && rp.top_k == pp.top_k;
  const int warp = threadIdx.x / 32;
  if (select)
    for (int t = warp; t < rp.tokens; t += kFrontWarps)  // phases: not in the unrolled form (it would spill)
      if (rp.fast_select)
        detail::router_select_token_fast(
            rp, t, c_sh[warp],
            t == 0 && rp.debug_stamps ? rp.debug_stamps + static_cast<size_t>(kMoeStampSelectPhases) * detail::kStampWords
                                      : nullptr,
            ids_sh);
      else
        detail::router_select_token<kCompact>(
          rp, t, c_sh[warp],
          kCompact && t == 0 && rp.debug_stamps ? rp.debug_stamps + static_cast<size_t>(kMoeStampSelectPhases) * detail::kStampWords
                                    : nullptr);
  if (threadIdx.x == 0) detail::stamp(phases, detail::kStampStart);
  const int groups = rp.hidden / kFp8Block;
  const int q_items = (flags & kMoeFrontNoQuantize) ? 0 : rp.tokens * groups;
  for (int item = warp; item < q_items; item += kFrontWarps) {
    const int row = item / groups, grp = item - row * groups;
    detail::quantize_group_warp(rp.x + static_cast<size_t>(row) * rp.ldx + grp * kFp8Block,
                                xq + static_cast<size_t>(row) * rp.hidden + grp * kFp8Block,
                                xs + static_cast<size_t>(row) * groups + grp);
  }
  // The ids written above (global memory, by lane 0 of each token's warp) are visible to the whole
  // block after the barrier at the start of permute_block.
  __syncthreads();
  if (threadIdx.x == 0) detail::stamp(phases, detail::kStampWaited);
  detail::permute_block(pp, sh, ids_shared ? ids_sh : nullptr);
  if (threadIdx.x == 0) detail::stamp(stamps, detail::kStampEnd);
}

}  // namespace

cudaError_t moe_front(const RouterParams& rp, bool select, const PermuteParams& pp, uint8_t* xq, float* xs,
                      cudaStream_t stream, int* zero_ints, int n_zero, int flags) {
  if (n_zero < 0 || (n_zero > 0 && !zero_ints)) return cudaErrorInvalidValue;
  if (rp.tokens < 0 || rp.tokens > kMoeFrontMaxTokens || rp.tokens != pp.tokens || rp.hidden <= 0 ||
      rp.hidden % kFp8Block != 0 || rp.ldx < rp.hidden || rp.ldx % 8 != 0)
    return cudaErrorInvalidValue;
  if (pp.top_k < 1 || pp.num_experts < 1 || pp.num_experts > kRouterMaxExperts || pp.tile_rows < 1)
    return cudaErrorInvalidValue;
  if (select && (rp.num_experts < 1 || rp.num_experts > kRouterMaxExperts || rp.top_k < 1 ||
                 rp.top_k > kRouterMaxTopK || rp.top_k > rp.num_experts || rp.n_group < 1 ||
                 rp.n_group > kRouterMaxGroups || rp.num_experts % rp.n_group != 0 || rp.topk_group < 1 ||
                 rp.topk_group > rp.n_group || !rp.logits || !rp.bias || !rp.topk_ids || !rp.topk_weights))
    return cudaErrorInvalidValue;
  if (rp.tokens == 0) return cudaSuccess;
  if (!rp.x || !xq || !xs || !pp.topk_ids || !pp.group_offsets || !pp.active_groups || !pp.num_active ||
      !pp.tile_prefix || !pp.row_token || !pp.slot_row)
    return cudaErrorInvalidValue;
  if (flags & kMoeFrontCompact)
    return detail::launch(moe_front_kernel<true>, dim3(1), dim3(kFrontWarps * 32), 0, stream, rp.pdl, rp, select, pp,
                          xq, xs, zero_ints, n_zero, flags);
  return detail::launch(moe_front_kernel<false>, dim3(1), dim3(kFrontWarps * 32), 0, stream, rp.pdl, rp, select, pp,
                        xq, xs, zero_ints, n_zero, flags);
}

}  // namespace glm5rt::kernels

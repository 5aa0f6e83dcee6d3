// Token permutation by expert: one block (permute_block.cuh).
#include "kernels/gemm/launch.cuh"
#include "kernels/moe/moe.h"
#include "kernels/moe/permute_block.cuh"

namespace glm5rt::kernels {
namespace {

constexpr int kPermuteThreads = 1024;

__global__ void __launch_bounds__(kPermuteThreads) permute_kernel(const PermuteParams p) {
  detail::pdl_wait_and_release();
  __shared__ detail::PermuteShared sh;
  detail::permute_block(p, sh);
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

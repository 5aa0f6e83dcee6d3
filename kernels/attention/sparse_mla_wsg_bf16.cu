// Instantiations of variant 11 (one 8-warp consumer group for a CTA's 32 heads, sparse_mla_wsg_kernel.cuh) for
// bf16 (1152-byte) records: GEMM1 in 2 accumulator chains per warp, or 4 (GLM5RT_MLA_V11_CHAINS=4, read once).
#include <cstdlib>

#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_wsg_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream) {
  if (heads_per_cta != 32) return cudaErrorInvalidValue;
  static const int chains = [] {
    const char* e = std::getenv("GLM5RT_MLA_V11_CHAINS");
    return e && std::atoi(e) == 4 ? 4 : 2;
  }();
  return chains == 4 ? launch_grid<WsgCfg, 32>(sparse_mla_wsg_kernel<32, 4>, true, a, stream)
                     : launch_grid<WsgCfg, 32>(sparse_mla_wsg_kernel<32, 2>, true, a, stream);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

// Instantiations of variant 11 (one 8-warp consumer group for a CTA's 32 heads, sparse_mla_wsg_kernel.cuh) for
// bf16 (1152-byte) records: P double-buffered with the partials published early (default) or one P buffer
// (GLM5RT_MLA_V11_EARLY=0, read once).
#include <cstdlib>

#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_wsg_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream) {
  if (heads_per_cta != 32) return cudaErrorInvalidValue;
  static const bool early = [] {
    const char* e = std::getenv("GLM5RT_MLA_V11_EARLY");
    return !(e && std::atoi(e) == 0);
  }();
  return early ? launch_grid<WsgCfg, 32>(sparse_mla_wsg_kernel<32, true>, true, a, stream)
               : launch_grid<WsgCfg, 32>(sparse_mla_wsg_kernel<32, false>, true, a, stream);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

// Instantiation of variant 15 (two 4-warp groups of 32 heads for a CTA's 64 heads, sparse_mla_wsq_kernel.cuh) for
// bf16 (1152-byte) records.
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_wsq_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream) {
  if (heads_per_cta != 64) return cudaErrorInvalidValue;
  return launch_grid<WsqCfg, 64>(sparse_mla_wsq_kernel<64>, true, a, stream);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

// Instantiation of variant 12 (variant 11's 32-head group over 16 warps, no producer warps,
// sparse_mla_ws16_kernel.cuh) for bf16 (1152-byte) records.
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_ws16_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream) {
  if (heads_per_cta != 32) return cudaErrorInvalidValue;
  return launch_grid<Ws16Cfg, 32>(sparse_mla_ws16_kernel<32>, true, a, stream);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

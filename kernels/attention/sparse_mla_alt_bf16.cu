// Instantiation of the alternating-step sparse MLA kernel (kernel_variant 9: bf16 records, 32 heads per CTA).
#include "kernels/attention/sparse_mla_alt_kernel.cuh"
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_alt_bf16(const KernelArgs& a, cudaStream_t stream) {
  return launch_grid<AltCfg<32>, 32>(sparse_mla_alt_kernel<32>, true, a, stream);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

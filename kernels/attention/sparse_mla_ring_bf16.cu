// Instantiations of the row-ring sparse MLA kernel (kernel_variant 8's default form) for bf16 (1152-byte) records.
#include "kernels/attention/sparse_mla_big_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_ring_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream) {
  switch (heads_per_cta) {
    case 8: return launch_s4_one<RingCfg, 8>(sparse_mla_ring_kernel<8>, a, stream);
    case 16: return launch_s4_one<RingCfg, 16>(sparse_mla_ring_kernel<16>, a, stream);
    case 32: return launch_s4_one<RingCfg, 32>(sparse_mla_ring_kernel<32>, a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail

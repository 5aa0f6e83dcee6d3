// Instantiations of variant 10 (the warp-specialized kernel with the softmax in registers) for bf16
// (1152-byte) records, 16 and 32 heads per CTA.
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_wsr_bf16(int heads_per_cta, int lazy, const KernelArgs& a, cudaStream_t stream) {
  switch (heads_per_cta) {
    case 16: return lazy == 2 ? launch_wsr_one<16, 2>(a, stream) : lazy == 1 ? launch_wsr_one<16, 1>(a, stream) : launch_wsr_one<16, 0>(a, stream);
    case 32: return lazy == 2 ? launch_wsr_one<32, 2>(a, stream) : lazy == 1 ? launch_wsr_one<32, 1>(a, stream) : launch_wsr_one<32, 0>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail

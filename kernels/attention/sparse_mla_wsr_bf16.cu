// Instantiations of variant 10 (the warp-specialized kernel with the softmax in registers) for bf16
// (1152-byte) records, 16 and 32 heads per CTA.
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_wsr_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream) {
  switch (heads_per_cta) {
    case 16: return launch_wsr_one<16>(a, stream);
    case 32: return launch_wsr_one<32>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail

// Instantiations of sparse MLA kernel variant 7 (FP8 records converted in registers, no dequantization pass).
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_reg_fp8(int heads_per_cta, bool dense, const KernelArgs& a, cudaStream_t stream) {
  switch (heads_per_cta) {
    case 8: return dense ? launch_reg_one<8, true>(a, stream) : launch_reg_one<8>(a, stream);
    case 16: return dense ? launch_reg_one<16, true>(a, stream) : launch_reg_one<16>(a, stream);
    case 32: return launch_reg_one<32>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail

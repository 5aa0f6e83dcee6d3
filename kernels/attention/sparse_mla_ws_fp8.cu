// Instantiations of the warp-specialized sparse MLA kernel (producer warps + consumer groups) for
// FP8 (656-byte) records.
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_ws_fp8(int heads_per_cta, const KernelArgs& a, cudaStream_t stream) {
  switch (heads_per_cta) {
    case 8: return launch_ws_one<8, true>(a, stream);
    case 16: return launch_ws_one<16, true>(a, stream);
    case 32: return launch_ws_one<32, true>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail

// Instantiations of the warp-specialized sparse MLA kernel (producer warps + consumer groups) for
// bf16 (1152-byte) records.
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_ws_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream) {
  switch (heads_per_cta) {
    case 8: return launch_ws_one<8, false>(a, stream);
    case 16: return launch_ws_one<16, false>(a, stream);
    case 32: return launch_ws_one<32, false>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail

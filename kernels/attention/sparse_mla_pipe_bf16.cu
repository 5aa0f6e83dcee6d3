// Instantiations of the pipelined sparse MLA kernel (16-token ring) for bf16 (1152-byte) records.
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_pipe_bf16(int heads_per_cta, bool two_per_sm, const KernelArgs& a, cudaStream_t stream) {
  switch (heads_per_cta) {
    case 8: return launch_pipe_one<8, false, 1>(a, stream);
    case 16: return launch_pipe_one<16, false, 1>(a, stream);
    case 32: return two_per_sm ? launch_pipe_one<32, false, 2>(a, stream) : launch_pipe_one<32, false, 1>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail

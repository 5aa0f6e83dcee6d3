// Instantiation of variant 10 (the warp-specialized kernel with the softmax in registers) for FP8 (656-byte)
// records: the 16-head CTA only (session 13), each record turned into a bf16 row in shared memory by the warp that
// copied it (WsrCfg<16, true>).
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_wsr_fp8(int heads_per_cta, const KernelArgs& a, cudaStream_t stream) {
  return heads_per_cta == 16 ? launch_wsr_one<16, true>(a, stream) : cudaErrorInvalidValue;
}

}  // namespace glm5rt::kernels::sparse_mla_detail

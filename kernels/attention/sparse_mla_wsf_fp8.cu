// Instantiation of sparse MLA kernel variant 16 (FP8 records, 8 heads per CTA, a warp per 16-token step).
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_wsf_fp8(int form, const KernelArgs& a, cudaStream_t stream) {
  // form 0: three consumer warps and a producer warp: 222 registers on sm_90, no spill, two CTAs per SM (four were capped
  // at 168 registers and spilled 80 bytes: 1.03-1.10x slower, H200 session 26 call 3). Session 27's A / B: form 1 four
  // self-gathering consumer warps (113 KB of shared memory: H100 / H200 only), form 2 three; forms 3 / 4 the same with
  // the copies spread over the previous step's GEMM1.
  if (form == 1) return launch_grid<WsfCfg<4, true>, 8>(sparse_mla_wsf_kernel<4, 1>, kCarveoutShared, a, stream);
  if (form == 2) return launch_grid<WsfCfg<3, true>, 8>(sparse_mla_wsf_kernel<3, 1>, kCarveoutShared, a, stream);
  if (form == 3) return launch_grid<WsfCfg<4, true>, 8>(sparse_mla_wsf_kernel<4, 2>, kCarveoutShared, a, stream);
  if (form == 4) return launch_grid<WsfCfg<3, true>, 8>(sparse_mla_wsf_kernel<3, 2>, kCarveoutShared, a, stream);
  return launch_grid<WsfCfg<3>, 8>(sparse_mla_wsf_kernel<3, 0>, kCarveoutShared, a, stream);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

// Instantiation of sparse MLA kernel variant 16 (FP8 records, 8 heads per CTA, a warp per 16-token step).
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_wsf_fp8(int copy, const KernelArgs& a, cudaStream_t stream) {
  // Three consumer warps: 222 registers on sm_90, no spill, two CTAs per SM (four were capped at 168 registers and
  // spilled 80 bytes: 1.03-1.10x slower, H200 session 26 call 3).
  if (copy == 1) return launch_grid<WsfCfg<3>, 8>(sparse_mla_wsf_kernel<3, 1>, kCarveoutShared, a, stream);
  if (copy == 2) return launch_grid<WsfCfg<3>, 8>(sparse_mla_wsf_kernel<3, 2>, kCarveoutShared, a, stream);
  return launch_grid<WsfCfg<3>, 8>(sparse_mla_wsf_kernel<3, 0>, kCarveoutShared, a, stream);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

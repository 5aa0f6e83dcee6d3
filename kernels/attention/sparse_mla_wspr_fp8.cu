// Instantiation of variant 14 (four warp pairs for a CTA's 64 heads, sparse_mla_wsp_kernel.cuh) for FP8 (656-byte)
// records read raw: each warp turns its own MMA operands into 16-bit ones in registers (session 29; the
// sparse_mla_wsp_fp8 unit converts the records into bf16 rows in shared memory instead).
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_wsp_raw_fp8(int heads_per_cta, const KernelArgs& a, cudaStream_t stream) {
  if (heads_per_cta != 64) return cudaErrorInvalidValue;
  constexpr int kCarve = cudaSharedmemCarveoutMaxL1;  // as launch_wsp_fp8
  return a.grid_ctas > 0
             ? launch_grid<WspCfg<true, true, true>, 64>(sparse_mla_wsp_kernel<64, true, true, true>, kCarve, a, stream)
             : launch_grid<WspCfg<true, false, true>, 64>(sparse_mla_wsp_kernel<64, true, false, true>, kCarve, a,
                                                          stream);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

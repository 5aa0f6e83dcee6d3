// Instantiation of variant 14 (four warp pairs for a CTA's 64 heads, sparse_mla_wsp_kernel.cuh) for FP8 (656-byte)
// records, converted to bf16 rows in shared memory by the pair that copied them (session 12).
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_wsp_fp8(int heads_per_cta, const KernelArgs& a, cudaStream_t stream) {
  if (heads_per_cta != 64 || a.wsp_lead < 1 || a.wsp_lead > 3) return cudaErrorInvalidValue;
  // Session 17: the persistent form where the launcher caps the grid (KernelArgs::grid_ctas).
  // One CTA per SM (its registers): the carveout leaves the rest of the SM's L1 (wsp_prefetch_item).
  constexpr int kCarve = cudaSharedmemCarveoutMaxL1;
  return a.grid_ctas > 0
             ? launch_grid<WspCfg<true, true>, 64>(sparse_mla_wsp_kernel<64, true, true>, kCarve, a, stream)
             : launch_grid<WspCfg<true, false>, 64>(sparse_mla_wsp_kernel<64, true, false>, kCarve, a, stream);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

// Instantiation of variant 14 (four warp pairs for a CTA's 64 heads, sparse_mla_wsp_kernel.cuh) for FP8 (656-byte)
// records, converted to bf16 rows in shared memory by the pair that copied them (session 12).
#include <cstdlib>

#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_wsp_fp8(int heads_per_cta, const KernelArgs& a, cudaStream_t stream) {
  if (heads_per_cta != 64 || a.wsp_lead < 1 || a.wsp_lead > 3) return cudaErrorInvalidValue;
  // Session 17 experiment (call 6): GEMM2's V fragments loaded before the softmax, GLM5RT_MLA_WSP_VPRE = 0 / 4 / 6.
  static const int vpre = [] {
    const char* e = std::getenv("GLM5RT_MLA_WSP_VPRE");
    return e ? std::atoi(e) : 4;
  }();
  if (vpre == 0) return launch_grid<WspCfg<true>, 64>(sparse_mla_wsp_kernel<64, true, 0>, true, a, stream);
  if (vpre == 6) return launch_grid<WspCfg<true>, 64>(sparse_mla_wsp_kernel<64, true, 6>, true, a, stream);
  return launch_grid<WspCfg<true>, 64>(sparse_mla_wsp_kernel<64, true, 4>, true, a, stream);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

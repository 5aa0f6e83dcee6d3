// Instantiation of sparse MLA kernel variant 16 (FP8 records, 8 heads per CTA, a warp per 16-token step).
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

static_assert(WsfCfg<3>::kFitsSm120, "the producer form is the one SM120 runs: at most 99 KB per block");

cudaError_t launch_wsf_fp8(bool self_gathering, const KernelArgs& a, cudaStream_t stream) {
  if (self_gathering)
    return launch_grid<WsfCfg<4, true>, 8>(sparse_mla_wsf_kernel<4, true>, kCarveoutShared, a, stream);
  return launch_grid<WsfCfg<3>, 8>(sparse_mla_wsf_kernel<3, false>, kCarveoutShared, a, stream);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

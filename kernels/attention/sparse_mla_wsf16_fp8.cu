// Instantiation of sparse MLA kernel variant 16's 16-head form (FP8 records, warp pairs splitting a step's dims).
#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_wsf16_fp8(const KernelArgs& a, cudaStream_t stream) {
  return launch_grid<Wsf16Cfg, 16>(sparse_mla_wsf16_kernel<Wsf16Cfg>, kCarveoutShared, a, stream);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

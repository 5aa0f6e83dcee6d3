// Instantiations of sparse MLA kernel variant 7 (FP8 records converted in registers, no dequantization pass).
#include <cstdlib>

#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

// Session 9 (measurement): GLM5RT_MLA_V7_PIPE = 0 (read once) runs the three-barrier step order.
static bool reg_pipe() {
  static const bool on = [] {
    const char* e = std::getenv("GLM5RT_MLA_V7_PIPE");
    return !(e && std::atoi(e) == 0);
  }();
  return on;
}

template <bool kPipe>
cudaError_t launch_reg_form(int heads_per_cta, bool quad, const KernelArgs& a, cudaStream_t stream) {
  switch (heads_per_cta) {
    case 8: return quad ? launch_reg_one<8, true, kPipe>(a, stream) : launch_reg_one<8, false, kPipe>(a, stream);
    case 16: return launch_reg_one<16, false, kPipe>(a, stream);
    case 32: return launch_reg_one<32, false, kPipe>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_reg_fp8(int heads_per_cta, bool quad, const KernelArgs& a, cudaStream_t stream) {
  return reg_pipe() ? launch_reg_form<true>(heads_per_cta, quad, a, stream)
                    : launch_reg_form<false>(heads_per_cta, quad, a, stream);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

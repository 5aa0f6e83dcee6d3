// Instantiations of the warp-specialized sparse MLA kernel (producer warps + consumer groups) for
// bf16 (1152-byte) records, with the consumer chain chosen once per process by GLM5RT_MLA_V5_CHAIN:
// unset / 2 = the shorter chain of sparse_mla_chain.cuh (session 4, the default), 1 = only its GEMM1 change,
// 0 = the previous chain (kept so that the default can be flipped back).
#include <cstdlib>

#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

namespace {
int chain_mode() {
  static const int mode = [] {
    const char* e = std::getenv("GLM5RT_MLA_V5_CHAIN");
    if (e == nullptr || e[0] == '\0') return 2;
    const int v = std::atoi(e);
    return v >= 0 && v <= 2 ? v : 2;
  }();
  return mode;
}

template <int HC>
cudaError_t launch_chain(const KernelArgs& a, cudaStream_t stream) {
  switch (chain_mode()) {
    case 0: return launch_ws_one<HC, false, false, 0>(a, stream);
    case 1: return launch_ws_one<HC, false, false, 1>(a, stream);
    default: return launch_ws_one<HC, false, false, 2>(a, stream);
  }
}
}  // namespace

cudaError_t launch_ws_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream) {
  switch (heads_per_cta) {
    case 8: return launch_chain<8>(a, stream);
    case 16: return launch_chain<16>(a, stream);
    case 32: return launch_chain<32>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail

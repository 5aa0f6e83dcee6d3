// Instantiations of the warp-specialized sparse MLA kernel (producer warps + consumer groups) for
// bf16 (1152-byte) records. GLM5RT_MLA_V5_CHAIN=1 (read once per process) runs the shorter consumer chain of
// sparse_mla_chain.cuh instead (session 4: measured slower at the compute-bound shapes, equal elsewhere;
// opt-in only, docs/PERFORMANCE.md "Session 4 (mla-chain)").
#include <cstdlib>
#include <cstring>

#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

namespace {
bool short_chain() {
  static const bool on = [] {
    const char* e = std::getenv("GLM5RT_MLA_V5_CHAIN");
    return e != nullptr && std::strcmp(e, "1") == 0;
  }();
  return on;
}

template <int HC>
cudaError_t launch_chain(const KernelArgs& a, cudaStream_t stream) {
  return short_chain() ? launch_ws_one<HC, false, true>(a, stream) : launch_ws_one<HC, false>(a, stream);
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

// Instantiations of the warp-specialized sparse MLA kernel (producer warps + consumer groups) for
// bf16 (1152-byte) records: the shorter consumer chain of sparse_mla_chain.cuh (session 4, the default) and
// the previous one (GLM5RT_MLA_V5_CHAIN=0, read once per process), so that either can be flipped back.
#include <cstdlib>
#include <cstring>

#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

namespace {
bool use_short_chain() {
  static const bool on = [] {
    const char* e = std::getenv("GLM5RT_MLA_V5_CHAIN");
    return e == nullptr || std::strcmp(e, "0") != 0;
  }();
  return on;
}
}  // namespace

cudaError_t launch_ws_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream) {
  const bool chain = use_short_chain();
  switch (heads_per_cta) {
    case 8: return chain ? launch_ws_one<8, false, false, true>(a, stream) : launch_ws_one<8, false>(a, stream);
    case 16: return chain ? launch_ws_one<16, false, false, true>(a, stream) : launch_ws_one<16, false>(a, stream);
    case 32: return chain ? launch_ws_one<32, false, false, true>(a, stream) : launch_ws_one<32, false>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail

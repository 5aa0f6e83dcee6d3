// Instantiations of variant 11 (one 8-warp consumer group for a CTA's 32 heads, sparse_mla_wsg_kernel.cuh) for
// bf16 (1152-byte) records. GEMM1 over k eighths for T <= 32 (T=8 1.02-1.04x, T=32 1.00-1.01x), over k quarters x
// token halves above (T=128 1.01x, prefill within noise; H200, docs/PERFORMANCE.md "Session 7"), except on SM120
// (cc 12.x): its build of the k-quarters form spills 16 bytes in the loop under the 10-warp register cap (168), the
// k-eighths form none (162 registers), and on the H200 the two were within 1% at T=128 and prefill (session 9);
// GLM5RT_MLA_V11_K8 = 1 / 0 (read once) forces one form.
#include <cstdlib>

#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels::sparse_mla_detail {

cudaError_t launch_wsg_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream) {
  if (heads_per_cta != 32) return cudaErrorInvalidValue;
  static const int forced = [] {
    const char* e = std::getenv("GLM5RT_MLA_V11_K8");
    return e == nullptr ? -1 : std::atoi(e) == 1 ? 1 : 0;
  }();
  const bool k8 = forced >= 0 ? forced == 1 : a.num_tokens <= 32 || a.cc_major >= 12;
  return k8 ? launch_grid<WsgCfg, 32>(sparse_mla_wsg_kernel<32, true>, kCarveoutShared, a, stream)
            : launch_grid<WsgCfg, 32>(sparse_mla_wsg_kernel<32, false>, kCarveoutShared, a, stream);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

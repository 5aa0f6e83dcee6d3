// The sampler's entry points: argument checks, the workspace size, and which kernels run
// (SampleParams::kernel, else GLM5RT_SAMPLING_KERNEL, else round 2).
#include "kernels/sampling/sampling.h"

#include <cstdlib>
#include <cstring>

#include "kernels/indexer/indexer_params.hpp"
#include "kernels/sampling/sampling_internal.hpp"

namespace glm5rt::kernels::sampling {

int default_sample_kernel() {
  static const int kernel = [] {
    const char* v = std::getenv("GLM5RT_SAMPLING_KERNEL");
    if (v && (std::strcmp(v, "v1") == 0 || std::strcmp(v, "1") == 0)) return 1;
    return 2;  // unset, "v2", or anything else
  }();
  return kernel;
}

size_t sample_workspace_bytes(int num_rows, int vocab) {
  if (num_rows <= 0 || vocab <= 0) return 0;
  return detail::layout(num_rows, vocab).topk_ws + indexer::indexer_topk_workspace_bytes(num_rows);
}

cudaError_t launch_sample_rows(const SampleParams& p, cudaStream_t stream) {
  if (p.num_rows < 0 || p.vocab <= 0 || p.num_rows > (1 << 24)) return cudaErrorInvalidValue;
  if (p.kernel < 0 || p.kernel > 2) return cudaErrorInvalidValue;
  if (p.num_rows == 0) return cudaSuccess;
  if (!p.logits || !p.out_tokens) return cudaErrorInvalidValue;
  if ((p.window_offsets == nullptr) != (p.window == nullptr) && p.window_offsets != nullptr) return cudaErrorInvalidValue;
  if (!(p.repetition_penalty > 0.0f)) return cudaErrorInvalidValue;
  const bool greedy = !(p.temperature > 0.0f);
  if (!greedy && !p.uniforms) return cudaErrorInvalidValue;
  if (!(p.top_p > 0.0f)) return cudaErrorInvalidValue;
  const bool needs_work = !greedy || (p.repetition_penalty != 1.0f && p.window_offsets);
  if (needs_work && (!p.workspace || p.workspace_bytes < sample_workspace_bytes(p.num_rows, p.vocab) ||
                     reinterpret_cast<uintptr_t>(p.workspace) % 16 != 0))
    return cudaErrorInvalidValue;
  const int kernel = p.kernel != 0 ? p.kernel : default_sample_kernel();
  if (kernel == 1) return detail::launch_round1(p, stream);
  if (detail::fast_topk_eligible(p)) return detail::launch_fast_topk(p, stream);
  return detail::launch_round2(p, stream);
}

}  // namespace glm5rt::kernels::sampling

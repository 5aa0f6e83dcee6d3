// Pieces shared between the sampler's translation units (not part of sampling.h's interface): the
// workspace layout and the launchers of the three paths.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/sampling/sampling.h"

namespace glm5rt::kernels::sampling::detail {

// top_k up to this (and below the vocabulary) takes round 2's fast path (sampling_topk.cu).
constexpr int kFastTopK = 2048;

// Workspace: c rows at a stride of c_stride(V) floats (16-byte aligned rows, as the indexer's top-k reads
// them), e rows (double), then the fast top-k path's arrays; the indexer's top-k workspace last
// (indexer_topk_workspace_bytes(rows), added by sample_workspace_bytes).
__host__ __device__ inline int64_t c_stride(int vocab) { return (static_cast<int64_t>(vocab) + 3) / 4 * 4; }
__host__ __device__ inline size_t align256(size_t v) { return (v + 255) / 256 * 256; }
struct Layout {
  size_t c, e, ids, row_seq, row_len, block_table, topk_ws;
};
__host__ __device__ inline Layout layout(int rows, int vocab) {
  Layout L;
  const size_t R = static_cast<size_t>(rows);
  L.c = 0;
  L.e = align256(R * static_cast<size_t>(c_stride(vocab)) * 4);
  L.ids = L.e + align256(R * static_cast<size_t>(vocab) * 8);
  L.row_seq = L.ids + align256(R * kFastTopK * 4);
  L.row_len = L.row_seq + align256(R * 4);
  L.block_table = L.row_len + align256(R * 4);
  L.topk_ws = L.block_table + 256;
  return L;
}

// Eligible for the fast top-k path.
inline bool fast_topk_eligible(const SampleParams& p) {
  return p.temperature > 0.0f && p.top_k > 0 && p.top_k < p.vocab && p.top_k <= kFastTopK && p.num_rows <= 65535;
}

// Arguments are checked by launch_sample_rows before these run.
cudaError_t launch_round1(const SampleParams& p, cudaStream_t stream);     // sampling_v1.cu
cudaError_t launch_round2(const SampleParams& p, cudaStream_t stream);     // sampling_v2.cu (no fast top-k)
cudaError_t launch_fast_topk(const SampleParams& p, cudaStream_t stream);  // sampling_topk.cu

}  // namespace glm5rt::kernels::sampling::detail

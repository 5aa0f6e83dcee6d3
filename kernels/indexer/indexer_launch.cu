// launch_indexer: scores + top-k as few launches as the rows allow (the choice documented in
// indexer_params.hpp). Batch-1 decode is latency-bound (H200: about 6 us for the scores kernel even at 1K
// keys, mostly launch and three dependent memory round trips), so every node saved counts:
//   short decode rows (<= k keys, <= 8 rows, workspace): one kernel (scores; each block writes its own
//     slots). Forced (launch_indexer_ex, fused = 1) it also takes rows up to 16K keys, whose last block to
//     finish selects the top-k from shared memory: exact, but slower than the two kernels (see below);
//   long decode rows (<= 64 rows, workspace): scores that count the first histogram, filter, finish
//     (three kernels; the finishing kernel clears the workspace header, no memset node);
//   otherwise (prefill, big batches, no workspace): scores, then a select per row when some row is longer
//     than k and none longer than 16384 keys, launched with programmatic dependent launch so that its
//     start overlaps the scores kernel's end: for at most 4 rows one cluster of 8 blocks per row
//     (indexer_topk_cluster.cu; H200, b1 8K FP8: 11.2 us), else the one-block register select
//     (indexer_topk_reg.cu; 12.8 us at b1 8K, faster at b32); else the round-1 row kernel.
#include "kernels/indexer/indexer_internal.hpp"
#include "kernels/indexer/indexer_params.hpp"

#include <cstdlib>

namespace glm5rt::kernels::indexer {

namespace detail {

// The one-line flip back to round 3: return false here (or set GLM5RT_INDEXER_ROUND4=0).
bool round4_default() {
  static const bool on = [] {
    const char* e = std::getenv("GLM5RT_INDEXER_ROUND4");
    return !(e && e[0] == '0');
  }();
  return on;
}

// (Round 4's select, three histogram copies and a sign split, measured slower than round 3's at 8K on the
// H200 of d58ca5c (8.78 against 7.95 us) and was removed in session 4; round 4's scores start-up was
// faster at every context (8K: 5.74 against 6.36 us) and is the default.)

bool scores_early_pages(const ScoreParams& p) { return p.early_pages == 1 || (p.early_pages == -1 && round4_default()); }

}  // namespace detail

cudaError_t launch_indexer_ex(const ScoreParams& sp, int k, int32_t* out_slots, float* out_scores, void* topk_workspace,
                              size_t topk_workspace_bytes, int fused, int row_kernel, cudaStream_t stream) {
  if (fused < -1 || fused > 1) return cudaErrorInvalidValue;
  TopkParams tp;
  tp.rows = sp.rows;
  tp.k = k;
  tp.scores = sp.scores;
  tp.score_stride = sp.score_stride;
  tp.out_slots = out_slots;
  tp.out_scores = out_scores;
  tp.workspace = topk_workspace;
  tp.workspace_bytes = topk_workspace_bytes;
  tp.row_kernel = row_kernel;
  cudaError_t err = detail::check_topk(tp);  // before anything is queued
  if (err == cudaSuccess) err = detail::check_scores(sp);
  if (err != cudaSuccess || sp.rows.num_rows == 0) return err;
  const bool eligible = indexer_fused_eligible(sp, topk_workspace, topk_workspace_bytes) && detail::topk_workspace_ok(tp);
  if (fused == 1 && !eligible) return cudaErrorInvalidValue;
  // Chosen by default only where it measured faster (H200, 1a02634): rows of at most k keys (1K: 5.2
  // against 7.4 us). Rows longer than k pay the last block's selection with 256 threads (8K: 25.6 against
  // 17.5 us for scores + one block per row), so they take it only when forced.
  const bool use_fused = eligible && (fused == 1 || (fused == -1 && sp.rows.max_row_len <= k));
  if (use_fused) return detail::launch_scores_fused(sp, k, out_slots, out_scores, topk_workspace, stream);
  if (detail::use_split(tp)) {
    if (sp.rows.max_row_len > 0) {
      err = detail::launch_scores_with_histogram(sp, k, topk_workspace, stream);
      if (err != cudaSuccess) return err;
    }
    return detail::launch_topk_split(tp, true, stream);
  }
  err = launch_indexer_scores(sp, stream);
  if (err != cudaSuccess) return err;
  return detail::launch_topk_row(tp, stream, /*after_scores=*/true);
}

cudaError_t launch_indexer_ex(const ScoreParams& sp, int k, int32_t* out_slots, float* out_scores, void* topk_workspace,
                              size_t topk_workspace_bytes, int fused, cudaStream_t stream) {
  return launch_indexer_ex(sp, k, out_slots, out_scores, topk_workspace, topk_workspace_bytes, fused, -1, stream);
}

cudaError_t launch_indexer(const ScoreParams& sp, int k, int32_t* out_slots, float* out_scores, void* topk_workspace,
                           size_t topk_workspace_bytes, cudaStream_t stream) {
  return launch_indexer_ex(sp, k, out_slots, out_scores, topk_workspace, topk_workspace_bytes, -1, stream);
}

}  // namespace glm5rt::kernels::indexer

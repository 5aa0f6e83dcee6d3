// Launch pieces shared between the indexer's translation units (not part of the public interface).
#pragma once

#include "kernels/indexer/indexer_params.hpp"

namespace glm5rt::kernels::indexer::detail {

// Argument checks; cudaSuccess also when there is nothing to do.
cudaError_t check_scores(const ScoreParams& p);
cudaError_t check_topk(const TopkParams& p);
bool topk_workspace_ok(const TopkParams& p);
bool use_split(const TopkParams& p);

// Scores that also count the split top-k's first histogram (per-block shared histograms, merged into
// the workspace with one global atomic per non-empty bin and block).
cudaError_t launch_scores_with_histogram(const ScoreParams& p, int k, void* workspace, cudaStream_t stream);
// Scores + top-k in one kernel for short decode rows (indexer_fused_eligible).
cudaError_t launch_scores_fused(const ScoreParams& p, int k, int32_t* out_slots, float* out_scores, void* workspace,
                                cudaStream_t stream);
// One block per row: the register select where chosen (use_reg_select), else the streaming radix kernel.
// after_scores: launched right behind launch_indexer's scores kernel (programmatic dependent launch).
cudaError_t launch_topk_row(const TopkParams& p, cudaStream_t stream, bool after_scores = false);
bool use_reg_select(const TopkParams& p);
// Round 4 switch (docs/PERFORMANCE.md, Indexer): the scores start-up is on by default
// (GLM5RT_INDEXER_ROUND4=0 in the environment, read once per process, turns it off). Explicit params win.
// (Round 4's select, row_kernel 2, measured slower at 8K and was removed in session 4.)
bool round4_default();
bool scores_early_pages(const ScoreParams& p);  // early_pages 1, or -1 with the round-4 default
cudaError_t launch_topk_reg(const TopkParams& p, bool after_scores, cudaStream_t stream);
// Round 5 (indexer_topk_cluster.cu): one cluster of 8 blocks per row (sm_90+), first digit fixed at the top
// 11 bits. Taken for row_kernel 4 where the device has clusters (else the register select runs), and for
// row_kernel -1 where the register select would run and the launch has at most kClusterSelectMaxRows
// rows, unless GLM5RT_INDEXER_CLUSTER=0. (row_kernel 3, its cluster min / max variant, was removed.)
bool cluster_select_supported();
bool cluster_select_default();
bool use_cluster_select(const TopkParams& p);
cudaError_t launch_topk_cluster(const TopkParams& p, bool after_scores, cudaStream_t stream);
// Benchmarks only: the cluster select for rows of at most 8192 keys with phase timestamps (clock64 of
// block 0 of row 0) written to probe[0..10]: start, before griddepcontrol.wait, after it, keys loaded (block barrier), first digit known, end of
// passes 0 / 1 / 2, emission totals exchanged, slots stored, exit barrier passed.
cudaError_t launch_topk_cluster_probe(const TopkParams& p, unsigned long long* probe, cudaStream_t stream);
// Split top-k: histogram (unless histogram_done), filter, finish.
cudaError_t launch_topk_split(const TopkParams& p, bool histogram_done, cudaStream_t stream);

}  // namespace glm5rt::kernels::indexer::detail

// Lightning-indexer kernels (GLM5.md step 5): plain-struct parameters and launchers.
//
// Scores: for every query row t (T rows) and every visible key position j < row_len[t] of the row's
// sequence, score[t][j] = sum_h w[t][h] * relu(q[t][h] . k[j] * 128^-0.5), h over 32 heads of 128 dims.
// Top-k: the k largest scores of each row (k <= 4096), returned as physical cache slots
// (page * page_size + offset), -1 padding when the row has fewer than k visible keys.
//
// Ordering is total and deterministic so that a CPU reference agrees exactly: scores compare by value
// (-0.0 equals +0.0), equal scores are broken by position, the lower position wins. The order of the k
// entries inside an output row is unspecified (the set is what is defined). NaN scores are not ranked
// meaningfully (inputs are expected to be finite).
//
// Formats (only GLM-5's shape is instantiated: 32 heads x 128 dims):
//   kBf16: q bf16 [T][32][128]; keys are 256-byte records (128 bf16) at key_cache + slot * 256.
//   kFp8:  q e4m3 [T][32][128] with one float32 scale per (token, head) in q_scale [T][32] (scales must be
//          >= 0, the amax/448 convention); keys use the paged 132-byte-per-token layout of DeepGEMM/vLLM:
//          a page of page_size tokens is page_size * 132 bytes, first the page_size 128-byte e4m3 vectors
//          (token-major), then page_size float32 scales. Dequantized key = e4m3 value * scale.
//   kInt8: (appended, session 3 round 6) as kFp8 but the 128 bytes of q and of each key are int8, scales
//          amax/127 (q_scale [T][32]; the key page's float32 scales): dequantized value = int8 * scale. The
//          same 132 bytes per key; mma.sync m16n8k32 s8 with exact int32 sums. Why: e4m3's 3 mantissa bits
//          cap recall of the float32 top-k at 0.967-0.986 (0.976-0.990 with bf16 queries), int8 reaches
//          0.992-0.997 on random data and on a fixture model (docs/PERFORMANCE.md, "Which formats can reach
//          0.99"). Not the DeepGEMM / vLLM e4m3 record: a cache written in one format is read in that format.
// weights w [T][32] are float32, already multiplied by 32^-0.5 (GLM5.md).
//
// Launchers return cudaError_t (argument errors: cudaErrorInvalidValue), never synchronise the host and
// never abort; all memory, including the scores workspace, belongs to the caller.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace glm5rt::kernels::indexer {

inline constexpr int kHeads = 32;
inline constexpr int kHeadDim = 128;
inline constexpr int kMaxTopK = 4096;
inline constexpr int kBf16RecordBytes = 256;
inline constexpr int kFp8RecordBytes = 132;  // 128 e4m3 + one float32 scale, split layout per page

enum class KeyFormat : int { kBf16 = 0, kFp8 = 1, kInt8 = 2 };

// Where each row's keys live: row t belongs to sequence row_seq[t], whose key j sits in page
// block_tables[row_seq[t] * block_table_stride + j / page_size] at offset j % page_size.
struct RowLayout {
  int num_rows = 0;                  // T
  const int32_t* row_seq = nullptr;  // [T] device
  const int32_t* row_len = nullptr;  // [T] device: visible keys (causal: position + 1), 0 allowed
  const int32_t* block_tables = nullptr;  // device
  int block_table_stride = 0;
  int page_size = 64;
  int max_row_len = 0;  // host-side upper bound of row_len (sizes the grid); rows never exceed it
};

// One key pool of a multi-pool launch (ScoreParams::seq_pools): the keys of layer `pool_layer` start at
// base + pool_layer * layer_bytes (16-byte aligned) and use the format's layout above within it.
struct KeyPool {
  const void* base = nullptr;
  int64_t layer_bytes = 0;
};

struct ScoreParams {
  RowLayout rows;
  KeyFormat format = KeyFormat::kFp8;
  const void* q = nullptr;           // [T][32][128] bf16, e4m3 or int8, 16-byte aligned
  const float* q_scale = nullptr;    // kFp8 and kInt8 only: [T][32]
  const float* weights = nullptr;    // [T][32]
  const void* key_cache = nullptr;   // 16-byte aligned
  float* scores = nullptr;           // out [T][score_stride]; entries j < row_len[t] are written
  int64_t score_stride = 0;          // >= max_row_len, multiple of 4, scores 16-byte aligned
  // Appended (batched decode over several caches): seq_pools = nullptr: every row's keys are in key_cache
  // (as before). Otherwise row t's keys are in the pool seq_pools[row_seq[t]] (device array [num_pools]) at
  // layer pool_layer, and key_cache is ignored; block tables and slots stay per sequence as before. A row
  // whose sequence index is outside [0, num_pools), or whose layer base is null or not 16-byte aligned,
  // scores every key 0 (the device-side table cannot be checked by the launcher).
  const KeyPool* seq_pools = nullptr;
  int num_pools = 0;
  int pool_layer = 0;
  // Appended (round 4): decode scores load the first chunk's page ids before staging q (single key pool
  // only). -1: the default (on unless the environment sets GLM5RT_INDEXER_ROUND4=0), 0: off (round 3),
  // 1: on. Results are identical either way; only the order of the loads changes.
  int early_pages = -1;
};

struct TopkParams {
  RowLayout rows;
  int k = 2048;                      // 1..kMaxTopK
  const float* scores = nullptr;     // [T][score_stride], as written by launch_indexer_scores
  int64_t score_stride = 0;          // multiple of 4, scores 16-byte aligned
  int32_t* out_slots = nullptr;      // out [T][k]
  float* out_scores = nullptr;       // optional out [T][k] (-inf in padded entries)
  // Decode rows are long and few: the split path spreads each row over many blocks (histogram, filter,
  // then one block per row for the last digits). It needs indexer_topk_workspace_bytes(T) of device
  // memory; without it the one-block-per-row path runs. split: -1 choose, 0 one block per row, 1 split.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  int split = -1;
  // Which one-block-per-row kernel: -1 choose, 0 the radix kernel that streams the row from L2 (any
  // length), 1 the register select (rows of at most kRegSelectMaxRowLen keys held in registers, round 3),
  // 4 the cluster select (round 5: one cluster of 8 blocks per row exchanging histograms through
  // distributed shared memory, its first digit fixed at the key's top 11 bits, rows of at most
  // kRegSelectMaxRowLen keys; on a device without thread block clusters, below sm_90, it runs the register
  // select). 2 (round 4's register select with three histogram copies) and 3 (the cluster select with a
  // cluster min / max first digit) measured slower and were removed in session 4: they return
  // cudaErrorNotSupported. Where -1 chooses a one-block-per-row select for rows longer than k: the
  // cluster select 4 for launches of at most kClusterSelectMaxRows rows (unless the environment sets
  // GLM5RT_INDEXER_CLUSTER=0), else the register select 1. H200, scores + select, b1 8K FP8: 11.19 us (4)
  // against 12.00 (3) and 12.84 (1); b32 8K: 37.1 (4) against 35.3 (1), hence the row limit.
  int row_kernel = -1;
};

inline constexpr int kRegSelectMaxRowLen = 16384;
// TopkParams::row_kernel values of removed paths (cudaErrorNotSupported).
inline constexpr int kRowKernelRemovedRound4 = 2;
inline constexpr int kRowKernelRemovedClusterMinMax = 3;
// Batch 1 measured faster with the cluster select, batch 32 slower; 2-4 rows are an unmeasured middle.
inline constexpr int kClusterSelectMaxRows = 4;

// Device workspace the split top-k path and the fused decode kernel need for T rows (about 45 KB per
// row). It must be zero-filled once before its first use (clear_indexer_topk_workspace, or any
// cudaMemset); every launch leaves it zero again, so no clearing sits in the per-call graph.
size_t indexer_topk_workspace_bytes(int num_rows);
cudaError_t clear_indexer_topk_workspace(void* workspace, size_t bytes, cudaStream_t stream);

// Decode rows short enough for the fused kernel: scores and top-k in one launch (at most kFusedMaxRows
// rows of at most kFusedMaxRowLen keys, needs the top-k workspace). launch_indexer takes it when every
// row has at most k keys (each block writes its own slots); for longer rows the last block of each row to
// finish selects the row's top-k from shared memory, which measured slower than scores + one block per
// row on the H200 (docs/PERFORMANCE.md), so those take it only through launch_indexer_ex(fused = 1).
inline constexpr int kFusedMaxRowLen = 16384;
inline constexpr int kFusedMaxRows = 8;
inline bool indexer_fused_eligible(const ScoreParams& p, const void* topk_workspace, size_t topk_workspace_bytes) {
  return p.rows.num_rows >= 1 && p.rows.num_rows <= kFusedMaxRows && p.rows.max_row_len <= kFusedMaxRowLen &&
         topk_workspace && topk_workspace_bytes >= indexer_topk_workspace_bytes(p.rows.num_rows);
}

// Scores only (writes params.scores).
cudaError_t launch_indexer_scores(const ScoreParams& params, cudaStream_t stream);
// Top-k only, from a scores buffer.
cudaError_t launch_indexer_topk(const TopkParams& params, cudaStream_t stream);
// Both, through the caller's scores buffer (params.scores, [T][score_stride] floats) and top-k workspace
// (indexer_topk_workspace_bytes(T) bytes, zeroed once; or null for the one-block-per-row top-k).
// With the workspace: the fused kernel when all rows have at most k keys (and <= 8 rows), the split path
// for few rows longer than 16384 keys (scores that count the first histogram, filter, finish), else
// scores + one block per row; without a workspace: scores + one block per row. One block per row is the
// register select (launched behind the scores with PDL) when k < max_row_len <= kRegSelectMaxRowLen, or
// for at most kClusterSelectMaxRows rows on sm_90+ the cluster select (one cluster of 8 blocks per row).
cudaError_t launch_indexer(const ScoreParams& params, int k, int32_t* out_slots, float* out_scores,
                           void* topk_workspace, size_t topk_workspace_bytes, cudaStream_t stream);
// The same with the fused kernel forced (fused = 1: cudaErrorInvalidValue when not eligible), refused
// (0) or chosen (-1, what launch_indexer does). For tests and benchmarks.
cudaError_t launch_indexer_ex(const ScoreParams& params, int k, int32_t* out_slots, float* out_scores,
                              void* topk_workspace, size_t topk_workspace_bytes, int fused, cudaStream_t stream);
// The same with the one-block-per-row kernel chosen too (row_kernel as TopkParams::row_kernel; it applies
// where scores + one block per row runs).
cudaError_t launch_indexer_ex(const ScoreParams& params, int k, int32_t* out_slots, float* out_scores,
                              void* topk_workspace, size_t topk_workspace_bytes, int fused, int row_kernel,
                              cudaStream_t stream);

// Bytes of scores workspace launch_indexer needs, and the stride to pass with it.
inline int64_t indexer_score_stride(int max_row_len) { return (static_cast<int64_t>(max_row_len) + 3) / 4 * 4; }
inline int64_t indexer_workspace_bytes(int num_rows, int max_row_len) {
  return static_cast<int64_t>(num_rows) * indexer_score_stride(max_row_len) * static_cast<int64_t>(sizeof(float));
}

}  // namespace glm5rt::kernels::indexer

// Simple, correct CUDA kernels for every step of the GLM-5 forward (docs/GLM5.md) that the first CUDA
// backend (lib/backend/cuda) needs: norms, RoPE, cache-record writes (bf16 or FP8 records), the
// lightning indexer (scores + exact top-k), sparse MLA in the absorbed form, MoE routing and a grouped
// row GEMM with FP8 block-scaled weights. They favour clarity over speed: the fast families live in
// kernels/attention, kernels/indexer, kernels/moe and kernels/gemm.
//
// Rules (DESIGN.md): plain-struct parameters, launchers return cudaError_t (the launch status), no host
// synchronisation, workspace from the caller. Every size that changes from one decode step to the next
// (positions, selected-token counts, rows per expert) is read from device memory, so a step can be
// captured once in a CUDA graph and replayed; grids are sized from capacities.
#pragma once

#include <cuda_runtime.h>
#include <cuda_bf16.h>

#include <cstdint>

namespace glm5k {

// Cache record formats (GLM5.md "Cache records"). Values are the GLM5RT_DTYPE_* codes.
enum RecordDtype : int32_t { kRecBf16 = 1, kRecFp8 = 3 };

// Latent record: [kv (kv_lora) | k_rot (rope)]. bf16: (kv_lora + rope) bf16. FP8: kv_lora e4m3, then
// ceil(kv_lora / 128) float32 scales (one per 128 values), then rope bf16 (656 bytes at GLM-5 sizes).
// Indexer key: bf16: index_dim bf16 per slot. FP8: index_dim e4m3 and one float32 scale per slot (132
// bytes at GLM-5 sizes), laid out per page as kernels/indexer expects: a page's page_size vectors, then
// its page_size scales (simple_device.cuh index_vector / index_scale).
struct RecordFormat {
  int32_t latent_dtype = kRecBf16, index_dtype = kRecBf16;
  int32_t kv_lora = 0, rope = 0, index_dim = 0;
  __host__ __device__ int32_t latent_bytes() const {
    return latent_dtype == kRecFp8 ? kv_lora + 4 * ((kv_lora + 127) / 128) + 2 * rope : 2 * (kv_lora + rope);
  }
  __host__ __device__ int32_t index_bytes() const { return index_dtype == kRecFp8 ? index_dim + 4 : 2 * index_dim; }
};

// One sequence of a batch: where its records live and its block table.
struct SeqCache {
  char* latent = nullptr;             // layer 0, slot 0 of the latent pool
  char* index = nullptr;              // layer 0, slot 0 of the indexer-key pool
  int64_t latent_layer_bytes = 0;     // distance between two layers' latent pools
  int64_t index_layer_bytes = 0;
  int32_t bt_offset = 0;              // first entry of its block table in BatchRows::block_tables
  int32_t page_size = 0;
};

// Per-row description of a batch, all in device memory.
struct BatchRows {
  const int32_t* seq = nullptr;           // [rows] sequence of each row
  const int32_t* pos = nullptr;           // [rows] position of each row
  const int64_t* slot = nullptr;          // [rows] physical slot its records go to
  const SeqCache* seqs = nullptr;         // [n_seqs]
  const int32_t* block_tables = nullptr;  // flattened
  int32_t rows = 0;
};

// x[r] += delta[r] (when delta is not null, written back), then out = w * x / sqrt(mean(x^2) + eps) as
// bf16 (out_b) and/or float32 (out_f). With gather, row i reads x[gather[i]] (no add). pdl (sm_90+ only):
// launched as a programmatic dependent, the kernel waiting for the previous one before any read.
cudaError_t launch_residual_rms_norm(float* x, const float* delta, const int32_t* gather, int32_t rows, int32_t n,
                                     const float* w, float eps, __nv_bfloat16* out_b, float* out_f,
                                     cudaStream_t stream, bool pdl = false);

// out[r] = embedding[tokens[r]] as float32.
cudaError_t launch_embed(const __nv_bfloat16* table, int32_t n, const int32_t* tokens, int32_t rows, float* out,
                         cudaStream_t stream);

// cos/sin [rows, half] of pos[r] * inv_freq[i] (float32 angle, cos/sin in double like the CPU), times
// attention_factor.
cudaError_t launch_rope_tables(const float* inv_freq, int32_t half, float attention_factor, const int32_t* pos,
                               int32_t rows, float* cos_out, float* sin_out, cudaStream_t stream);

// MLA per-row preparation. ckv [rows, kv_lora + rope]: kv = rms(kv, kv_norm, 1e-6), k_rot = RoPE(k_rot);
// the record is written at the row's slot of `layer`. q [rows, heads, nope + rope]: q_nope goes to
// q_nope_out (bf16 [rows, heads, nope]), RoPE(q_rot) to q_rot_out (float32 [rows, heads, rope]); both
// skipped when q_nope_out is null (the backend's attention fusion does them inside absorbed_heads).
struct MlaPrepParams {
  const float* ckv;
  const float* kv_norm;
  const float* q;
  const float* cos;
  const float* sin;
  BatchRows batch;
  RecordFormat fmt;
  int32_t layer, heads, nope;
  __nv_bfloat16* q_nope_out;
  float* q_rot_out;
};
cudaError_t launch_mla_prep(const MlaPrepParams& p, cudaStream_t stream);

// Indexer per-row preparation: key = RoPE(LayerNorm(kraw, w, b, 1e-6)) on its first `rope` values,
// written to the row's indexer-key record of `layer` (zeros when kraw is null: layers without an
// indexer); qi [rows, heads, dim] gets RoPE on each head's first `rope` values in place; wts *= head_scale.
struct IndexerPrepParams {
  const float* kraw;
  const float* k_norm_w;
  const float* k_norm_b;
  float* qi;
  float* wts;
  const float* cos;
  const float* sin;
  BatchRows batch;
  RecordFormat fmt;
  int32_t layer, heads;
  float head_scale;
};
cudaError_t launch_indexer_prep(const IndexerPrepParams& p, cudaStream_t stream);

// launch_mla_prep and launch_indexer_prep as one launch of 2 x rows blocks (same per-row code, same
// float operations and summation order), and, when q_out is set (and idx.qi), each indexer row's query
// converted for the fast indexer right after its RoPE, as launch_indexer_query does (q_out / q_scale
// layouts as there; fast_bridge.cuh). pdl: launched as a programmatic dependent (sm_90+), waiting for
// the previous kernel before any read. The CUDA backend's attention fusion (set_attention_fusion).
struct AttentionPrepParams {
  MlaPrepParams mla;
  IndexerPrepParams idx;  // idx.batch.rows == mla.batch.rows
  void* q_out = nullptr;
  float* q_scale = nullptr;
  bool q_fp8 = false;
  bool pdl = false;
};
cudaError_t launch_attention_prep(const AttentionPrepParams& p, cudaStream_t stream);

// scores[r][t] = sum_h wts[r][h] * relu(qi[r][h] . key_t * dot_scale) for t <= pos[r]; -inf for
// pos[r] < t < ctx_cap. Grid covers ctx_cap tokens per row.
struct IndexerScoreParams {
  const float* qi;
  const float* wts;
  BatchRows batch;
  RecordFormat fmt;
  int32_t layer, heads;
  float dot_scale;
  int32_t ctx_cap;
  float* scores;  // [rows, ctx_cap]
};
cudaError_t launch_indexer_scores(const IndexerScoreParams& p, cudaStream_t stream);

// The min(k, pos[r] + 1) largest scores of each row (ties: the lower position wins), as positions in
// ascending order into sel[r * k ...], padded with -1; n_sel[r] = their count. One block per row (radix
// select on the float bits).
cudaError_t launch_topk_select(const float* scores, int32_t ctx_cap, const int32_t* pos, int32_t rows, int32_t k,
                               int32_t* sel, int32_t* n_sel, cudaStream_t stream);

// Sparse MLA in the absorbed form, one block per (head, row): scores over the selected positions'
// latent records, softmax (scale), o_lat = sum p_t kv_t. q_lat float32 [rows, heads, kv_lora],
// q_rot float32 [rows, heads, rope], out bf16 [rows, heads, kv_lora].
struct SparseMlaParams {
  const float* q_lat;
  const float* q_rot;
  const int32_t* sel;  // [rows, k] positions
  const int32_t* n_sel;
  int32_t k;
  BatchRows batch;
  RecordFormat fmt;
  int32_t layer, heads;
  float scale;
  __nv_bfloat16* out;
};
cudaError_t launch_sparse_mla(const SparseMlaParams& p, cudaStream_t stream);

// Weight storage of the row GEMM.
enum WeightDtype : int32_t { kWF32 = 0, kWBf16 = 1, kWFp8 = 3 };

// C[g-tile rows][n] = sum_k A[row][k] * W_g[n][k] (float32 accumulation).
// A: float32 or bf16 (a_bf16), row `a_rows ? a_rows[i] : i`, leading dimension lda.
// W: [n][k] row-major with ldw, dtype kWF32 / kWBf16 / kWFp8 (then scale[(n / block_n) * ld_scale +
// k / block_k] multiplies). Groups (MoE experts): W_g = W + g * w_group_stride elements, scale likewise.
// Rows: without tiles, rows [0, m) of group 0. With tiles (int32 x3:
// group, first row, row count; n_tiles on the device), one y-block per tile.
// Batch (grid.z): A, W, scale, C advance by their batch strides (heads of the absorbed attention).
// C: float32 or bf16 (c_bf16), leading dimension ldc.
struct RowGemmParams {
  const void* a = nullptr;
  bool a_bf16 = true;
  int64_t lda = 0;
  const int32_t* a_rows = nullptr;
  const void* w = nullptr;
  int32_t w_dtype = kWBf16;
  int64_t ldw = 0;
  const float* scale = nullptr;
  int32_t block_n = 128, block_k = 128;
  int64_t ld_scale = 0;
  int64_t w_group_stride = 0, scale_group_stride = 0;
  int32_t m = 0;
  const int32_t* tiles = nullptr;
  const int32_t* n_tiles = nullptr;
  int32_t max_tiles = 0;
  int32_t n = 0, k = 0;
  int32_t batch = 1;
  int64_t a_batch_stride = 0, w_batch_stride = 0, c_batch_stride = 0;
  void* c = nullptr;
  bool c_bf16 = false;
  int64_t ldc = 0;
};
constexpr int32_t kRowGemmTileM = 16;
cudaError_t launch_row_gemm(const RowGemmParams& p, cudaStream_t stream);

// out (bf16) = FP8 weight [rows, cols] times its block scales [ceil(rows/br), ceil(cols/bc)].
cudaError_t launch_fp8_dequant(const uint8_t* q, const float* scale, int64_t rows, int64_t cols, int32_t block_rows,
                               int32_t block_cols, __nv_bfloat16* out, cudaStream_t stream);

// out[r][j] = silu(g[r][j]) * u[r][j] as bf16 (contiguous [rows, n]).
cudaError_t launch_silu_mul(const float* g, const float* u, int32_t rows, int32_t n, __nv_bfloat16* out,
                            cudaStream_t stream);

// MoE routing (GLM5.md step 9), one thread per row: sigmoid scores, + bias, best groups (sum of top-2),
// top-k experts among kept groups (ties: lower id), weights from the sigmoid, normalised, scaled.
// ids / weights [rows, top_k], sorted by expert id.
struct MoeRouteParams {
  const float* logits;  // [rows, experts]
  const float* bias;    // [experts]
  int32_t rows, experts, top_k, n_group, topk_group;
  bool norm_topk_prob;
  float scaling;
  int32_t* ids;
  float* weights;
};
cudaError_t launch_moe_route(const MoeRouteParams& p, cudaStream_t stream);

// Groups the (row, k) pairs by expert (stable: expert ascending, then row, then k): pair_rows[p] = row
// of pair p, pair_of[r * top_k + k] = p, tiles (group, first pair, count) of at most kRowGemmTileM pairs,
// n_tiles. One block. max_tiles bounds the tile list (rows * top_k / tile + min(experts, rows * top_k)).
cudaError_t launch_moe_plan(const int32_t* ids, int32_t rows, int32_t top_k, int32_t experts, int32_t* pair_rows,
                            int32_t* pair_of, int32_t* tiles, int32_t* n_tiles, int32_t max_tiles,
                            cudaStream_t stream);
int32_t moe_max_tiles(int32_t rows, int32_t top_k, int32_t experts);

// out[r] = sum_k (experts ascending) weights[r][k] * y[pair_of[r][k]] + shared[r] (shared may be null).
cudaError_t launch_moe_combine(const float* y, const int32_t* pair_of, const float* weights, const float* shared,
                               int32_t rows, int32_t top_k, int32_t n, float* out, cudaStream_t stream);

// out[r] = argmax of logits row r (lowest id wins ties; NaN never wins).
cudaError_t launch_argmax_rows(const float* logits, int32_t rows, int32_t n, int32_t* out, cudaStream_t stream);

// Deterministic pseudo-random fills for benchmarks and tests (hash of index and seed), uniform in
// [-amplitude, amplitude]; fp8 values are stored as e4m3 of that, scales uniform in [lo, hi].
cudaError_t launch_fill_random_bf16(__nv_bfloat16* out, int64_t n, uint64_t seed, float amplitude, cudaStream_t stream);
cudaError_t launch_fill_random_f32(float* out, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream);
cudaError_t launch_fill_random_fp8(uint8_t* out, int64_t n, uint64_t seed, float amplitude, cudaStream_t stream);
// Random FP8 cache records (benchmarks): bytes / period_bytes periods of [fp8_bytes of e4m3 values in +-448]
// [f32_bytes of float32 scales in [0.5, 1.5] / 448][bf16 values in +-1 to the period's end]; all sizes
// multiples of 4 (a 656-byte latent record: 512 / 16 / 128; an indexer-key page: ps * 128 / ps * 4 / 0).
cudaError_t launch_fill_random_records(void* out, int64_t bytes, int32_t period_bytes, int32_t fp8_bytes,
                                       int32_t f32_bytes, uint64_t seed, cudaStream_t stream);

}  // namespace glm5k

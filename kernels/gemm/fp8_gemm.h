// FP8 e4m3 block-scaled GEMM (GLM-5-FP8 weights), dense or grouped by expert.
//
//   C[r, n] = sum_k  A[src(r), k] * a_scale[src(r), k/128]  *  W_g[n, k] * w_scale_g[n/128, k/128]
//
// A: activations quantised to e4m3 with one float32 scale per row and 128-wide group of K (produced by
//    fp8_quantize_groups). W: the checkpoint's weight [N, K] e4m3 with its float32 scale_inv
//    [ceil(N/128), K/128] (multiplied, despite the name). C: bf16, float32 accumulation.
// Grouped form (MoE): rows [group_offsets[g], group_offsets[g+1]) use group g's weights; the rows of A are
// gathered through a_row_map (permuted row -> source row) when it is given. A group's weight may be split
// into parts of part_rows rows each (gate | up kept as the checkpoint's two tensors).
//
// Two kernels behind one launcher, both warp-level mma.sync m16n8k32 (no wgmma, <= 99 KB shared memory,
// SM120 rules; they need sm_89+):
//   decode:  few rows per group. Memory-bound: weights stream from global memory straight into mma
//            operand registers (16-byte loads, no shared memory), rows as the mma's N dimension.
//   prefill: many rows per group. 64x128 (4-stage) or 128x128 (3-stage) tiles with K blocks of 128,
//            cp.async pipeline, ldmatrix, swizzled smem; FP8 mma, or on sm_90 (no FP8 mma.sync) f16 mma
//            after an exact in-register e4m3 -> f16 conversion.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace glm5rt::kernels {

constexpr int kFp8Block = 128;          // weight block and activation group size (K and N)
constexpr int kFp8PrefillTileRows = 64;  // default rows per prefill tile (64 or 128; tile_prefix granularity)
constexpr int kFp8MaxVariedParts = 8;    // Fp8GemmParams::part_begin has kFp8MaxVariedParts + 1 entries

enum class Fp8GemmPath { automatic, decode, prefill };

struct Fp8GemmParams {
  int n = 0;  // output features (rows of W); any value >= 1, even
  int k = 0;  // reduction; multiple of 128

  // Activations: e4m3 [rows, k] (row stride lda bytes) and float32 scales [rows, k/128] (row stride
  // ld_scale floats).
  const uint8_t* a = nullptr;
  const float* a_scale = nullptr;
  int lda = 0;
  int ld_scale = 0;
  const int* a_row_map = nullptr;  // device [max_rows]; row r reads A row a_row_map[r]; null: identity

  // Weights: device arrays of num_groups * num_parts pointers, entry g * num_parts + p.
  const uint8_t* const* w = nullptr;
  const float* const* w_scale = nullptr;
  int num_parts = 1;
  int part_rows = 0;  // rows per part (multiple of 128 when num_parts > 1); 0 means n
  // Parts of unequal size (decode path only; e.g. several dense projections that read the same A run as
  // ONE launch: q_a | kv_a | indexer wk | weights_proj): when varied_parts is set, part p covers output
  // columns [part_begin[p], part_begin[p + 1]), part_begin[0] = 0, every boundary but the last a
  // multiple of 64 (a decode block of 64 rows never straddles two parts), part_begin[num_parts] = n,
  // num_parts <= kFp8MaxVariedParts. part_rows is ignored then. Each part's scale_inv rows count from
  // the part's own first row, as in a checkpoint tensor.
  bool varied_parts = false;
  int part_begin[9] = {};
  // Weight row stride in bytes (0: k) and scale_inv row stride in floats (0: k / 128): W and its scales
  // may be a K slice of a wider checkpoint tensor (split-K without a copy of the weights: slice s of a
  // [n, K] weight is W + s * k, its scales WS + s * k / 128, with ldw = K, ld_wscale = K / 128).
  // Decode path only.
  int ldw = 0;
  int ld_wscale = 0;

  // Output bf16 [rows, n], row stride ldc elements.
  __nv_bfloat16* c = nullptr;
  int ldc = 0;

  // Rows and groups. Dense: num_groups = 1, group_offsets = null, rows [0, max_rows).
  int num_groups = 1;
  int max_rows = 0;                  // host-known upper bound on all rows (sizes the grid)
  const int* group_offsets = nullptr;  // device [num_groups + 1]
  // Needed with group_offsets (both produced by moe_permute): compact list of non-empty groups
  // (active_groups[0 .. *num_active)) for the decode kernel, and the prefix of ceil(rows_g / tile rows)
  // tiles [num_groups + 1] for the prefill kernel (computed with the same prefill_tile_rows).
  int prefill_tile_rows = 0;  // 64 or 128; 0 means kFp8PrefillTileRows
  // Prefill tensor-core instruction: 0 automatic (f16 mma after an in-register e4m3 -> f16 conversion on
  // compute capability 9.0, which lacks native FP8 mma.sync; native FP8 mma elsewhere), 1 native FP8 mma,
  // 2 f16 mma after conversion.
  int prefill_mma = 0;
  bool pdl = false;  // programmatic dependent launch (sm_90+; see launch.cuh)
  // Decode kernel, 1-tile form: K blocks of weights in flight per lane (2 or 3; 0: 3 when that grid
  // fits in one wave of resident blocks on this GPU, else 2).
  int decode_depth = 0;
  // Decode kernel for one-token-tile groups (<= 4 rows per group expected): 0 automatic (the cp.async
  // ring, deepest that fits the grid in one wave, depth 3 when none does), 1 the register ring
  // (fp8_gemm_decode.cuh), 2 the cp.async ring (fp8_gemm_decode_async.cuh).
  int decode_kernel = 0;
  // The group metadata (group_offsets, active_groups, num_active) and the weights were complete before
  // the previous kernel in the stream started (e.g. the MoE down projection: written by the permutation,
  // two launches earlier). The cp.async decode kernel then starts streaming weights before its
  // programmatic-dependent-launch wait, overlapping the previous kernel. Leave false otherwise.
  bool group_info_ready = false;
  const int* active_groups = nullptr;
  const int* num_active = nullptr;
  const int* tile_prefix = nullptr;
  int max_active = 0;  // host-known upper bound on *num_active (grid size of the decode kernel)

  Fp8GemmPath path = Fp8GemmPath::automatic;
  int expected_rows_per_group = 0;  // hint for the automatic choice (0: max_rows / num_groups)
  // Blocks of another kernel (on another stream) expected to stay resident while this one starts: the
  // decode kernel's "fits in one wave" choices leave room for that many blocks, so that this grid does
  // not get a late second wave (e.g. the MoE's routed gate_up beside the shared expert's GEMM).
  int concurrent_blocks = 0;
  // With group_info_ready, the cp.async decode kernel also asks L2 for this many further K blocks of its
  // weights (beyond the ring's DEPTH-1) before its PDL wait, so that the wait (e.g. the MoE down GEMM
  // waiting for SwiGLU, which waits for the gate_up GEMM's tail) overlaps more weight traffic. A hint
  // only: results do not depend on it. 0: none.
  int decode_l2_prefetch = 0;
  // The cp.async decode kernel copies whole 128-byte lines: each copy instruction of a warp covers 4
  // weight rows x 128 contiguous bytes instead of 8 rows x 64 bytes, so every line of weights is asked of
  // the memory system once, whole, instead of as two halves by two instructions (half the requests per
  // byte), through a swizzled stage that each warp shares between its lanes. The same bits. Not in the
  // general form (varied parts / strided weights), which ignores it. false: the previous copy geometry.
  bool decode_line_copies = false;
  // The cp.async decode kernel's weight copies carry the L2 evict_first policy (weights read once give
  // way first to data that is read again). A hint: results do not depend on it.
  bool decode_evict_first = false;

  // Optional fused epilogue (MoE decode): the weighted combine of the grouped rows back to token order,
  // done by the GEMM itself instead of a separate kernel after it. Each warp owns 16 output columns; after
  // writing its C values it counts itself in combine_counters[column / 16] (device atomics), and the
  // warp that arrives last for those columns (the count reaches *num_active) sums, for every token t,
  //   out[t, col] = sum_k w[t,k] * C[slot_row[t,k], col]  (+ C[*shared_row_begin + t, col])
  // reading the bf16 C values the other warps stored, in k order with the same float32 operations as the
  // separate combine (moe_combine): the same bits whichever warp arrives last. Grouped form only, and only
  // on the cp.async decode kernel (fp8_gemm returns cudaErrorInvalidValue when another kernel would run).
  // The counters [ceil(n / 16)] must be zero when the kernel starts (the MoE front kernel zeroes them);
  // the last warp resets its counter to zero too.
  int* combine_counters = nullptr;     // null: no fused combine
  __nv_bfloat16* combine_out = nullptr;  // [combine_tokens, n], row stride n, 4-byte aligned
  int combine_tokens = 0;
  int combine_top_k = 0;
  const int* combine_slot_row = nullptr;      // [tokens, top_k]: C row of (t, k), < 0 if dropped
  const float* combine_weights = nullptr;     // [tokens, top_k]
  const int* combine_shared_row_begin = nullptr;  // device; null: no shared-expert rows

  // Optional fused prologue (MoE decode; cp.async decode kernel, together with the fused combine): A is
  // not read from a / a_scale. Each block computes the A rows of its current pass itself, as e4m3 with
  // per-128-group scales of h = silu(gate) * up from the bf16 rows of swiglu_gate_up ([rows, 2k]: gate
  // | up, row stride swiglu_ld elements; row r of the output uses row r), with the SwiGLU kernel's code
  // (detail::swiglu_quantize_group_warp), into shared memory: the same bits as moe_swiglu_quantize
  // followed by the plain GEMM. A pass then covers swiglu_rows (1..8) rows of a group instead of 8
  // (shared memory for that many rows; a group with more rows takes more passes). Needs a_row_map null
  // and n, part_rows multiples of 64 (every warp of a block active: the prologue has block barriers).
  const __nv_bfloat16* swiglu_gate_up = nullptr;  // null: A from a / a_scale
  int swiglu_ld = 0;
  int swiglu_rows = 0;

  // Debug timeline (benchmarks): kStampWords u64 of %globaltimer min/max (launch.cuh, detail::stamp) for
  // block start, past the PDL wait and end of work; written by the cp.async decode kernel only. Null: off.
  unsigned long long* debug_stamps = nullptr;
};

// Checks the parameters and launches on `stream`. No host synchronisation. Returns cudaErrorInvalidValue
// for bad parameters and cudaErrorNotSupported on GPUs without FP8 mma (below compute capability 8.9).
cudaError_t fp8_gemm(const Fp8GemmParams& p, cudaStream_t stream);

// Sums the split-K partials of fp8_gemm into float32 and scatters the columns of each part to its own
// output: in bf16 [slices * rows, n] (row s * rows + r = slice s of row r, row stride ld_in elements),
// out[p] float32 [rows, part_begin[p + 1] - part_begin[p]] (dense rows). slices = 1: a plain widening.
// Summation in slice order 0, 1, .. (as the backend's sum of slices). part_begin as in Fp8GemmParams
// (boundaries multiples of 8 here; n multiple of 8), outputs and input 16-byte aligned. PDL as fp8_gemm.
struct Fp8SplitReduceParams {
  const __nv_bfloat16* in = nullptr;
  int ld_in = 0;
  int slices = 1;
  int rows = 0;
  int n = 0;
  int num_parts = 1;
  int part_begin[9] = {};
  float* out[8] = {};
  bool pdl = false;
};
cudaError_t fp8_split_reduce(const Fp8SplitReduceParams& p, cudaStream_t stream);

// Per-token-group quantisation: x bf16 [rows, k] (row stride ldx) -> q e4m3 [rows, k] (stride ldq) and
// scale [rows, k/128] (stride ld_scale); scale = max(amax, 1e-10) / 448, q = rn_satfinite(x / scale).
cudaError_t fp8_quantize_groups(const __nv_bfloat16* x, int ldx, int rows, int k, uint8_t* q, int ldq,
                                float* scale, int ld_scale, cudaStream_t stream, bool pdl = false);

}  // namespace glm5rt::kernels

// GLM-5 MoE block on the GPU: router, token permutation by expert, grouped FP8 expert GEMMs, SwiGLU,
// weighted combine back to token order, shared expert. Plain-struct parameters, launchers that return
// cudaError_t, no host synchronisation, workspace from the caller (size from moe_workspace_size).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace glm5rt::kernels {

constexpr int kRouterMaxExperts = 256;
constexpr int kRouterMaxTopK = 16;
constexpr int kRouterMaxGroups = 32;

struct RouterParams {
  int tokens = 0;
  int hidden = 0;       // multiple of 8
  int num_experts = 0;  // <= 256
  int top_k = 0;        // <= 16, <= num_experts
  int n_group = 1;      // divides num_experts, <= 32; experts per group >= 2 when n_group > 1
  int topk_group = 1;   // <= n_group
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
  const __nv_bfloat16* x = nullptr;       // [tokens, hidden], row stride ldx (post-attention-norm output)
  int ldx = 0;
  const __nv_bfloat16* weight = nullptr;  // mlp.gate.weight [num_experts, hidden]
  const float* bias = nullptr;            // e_score_correction_bias [num_experts] (float32)
  float* logits = nullptr;                // out/workspace [tokens, num_experts] float32
  int* topk_ids = nullptr;                // out [tokens, top_k]
  float* topk_weights = nullptr;          // out [tokens, top_k]
  bool pdl = false;                       // programmatic dependent launch (kernels/gemm/launch.cuh)
  // Few-token logits kernel: stage x with cp.async (every piece in flight at once; x 16-byte aligned)
  // instead of a load-then-store loop. The same logits.
  bool stage_async = false;
  // Few-token logits kernel only (<= 16 tokens; the launcher refuses it otherwise): also quantise x per
  // 128-group to e4m3 into xq [tokens, hidden] / xs [tokens, hidden / 128], exactly as
  // fp8_quantize_groups does. Null: not.
  uint8_t* xq = nullptr;
  float* xs = nullptr;
  // The selection (router select kernel and the fused front) in its fast form (router_select.cuh,
  // router_select_token_fast: loads first, warp reductions per round, results in registers). The same bits.
  bool fast_select = false;
  // Debug timeline (benchmarks): 2 slots of kStampWords u64 (kernels/gemm/launch.cuh): the logits kernel,
  // then the fused front kernel. Null: off.
  unsigned long long* debug_stamps = nullptr;
};

// GLM5.md step 9, with router_math.h's summation order and sigmoid: logits in float32, s = sigmoid,
// c = s + bias (selection only), group score = sum of the group's top-2 c, keep topk_group groups, the
// other groups' c become 0.0 (as transformers' masked_fill), top_k experts by c (ties: lower id first),
// weights = s of the chosen experts, / (sum + 1e-20) when norm_topk_prob, * routed_scaling_factor.
// Experts are listed by decreasing c.
cudaError_t moe_route(const RouterParams& p, cudaStream_t stream);

// Permutation: groups 0..E-1 are the routed experts, group E is the shared expert (all tokens) when
// with_shared. Rows of a group are contiguous in the permuted order.
struct PermuteParams {
  int tokens = 0;
  int top_k = 0;
  int num_experts = 0;
  bool with_shared = true;
  const int* topk_ids = nullptr;  // [tokens, top_k]; ids outside [0, E) are dropped
  int* group_offsets = nullptr;   // out [G + 1], G = E + with_shared
  int* active_groups = nullptr;   // out [G] non-empty groups, ascending
  int* num_active = nullptr;      // out [1]
  int* tile_prefix = nullptr;     // out [G + 1] prefix of ceil(rows_g / tile_rows)
  int tile_rows = 64;             // the prefill GEMM's tile rows (Fp8GemmParams::prefill_tile_rows)
  int* row_token = nullptr;       // out [tokens * top_k + tokens]: permuted row -> token
  int* slot_row = nullptr;        // out [tokens * top_k]: (token, k) -> permuted row, -1 if dropped
  bool pdl = false;
  // The single-pass form (permute_block.cuh; MoeParams::permute_single_pass) where the block has at most
  // 4 assignments per thread (tokens * top_k <= 4 x its threads); the general form otherwise. The same
  // outputs.
  bool single_pass = false;
};
cudaError_t moe_permute(const PermuteParams& p, cudaStream_t stream);

// h = silu(gate) * up from the gate_up GEMM's bf16 rows [rows, 2 * inter] (gate | up), quantised per
// 128-group to e4m3 [rows, inter] with scales [rows, inter / 128].
cudaError_t moe_swiglu_quantize(const __nv_bfloat16* gate_up, int rows, int inter, uint8_t* q, float* scale,
                                cudaStream_t stream, bool pdl = false);

// out[t] = sum_k w[t,k] * y[slot_row[t,k]] (+ y[*shared_row_begin + t] when shared_row_begin, a device
// pointer, e.g. &group_offsets[E], is given), float32 sums in k order, bf16 result [tokens, hidden].
cudaError_t moe_combine(const __nv_bfloat16* y, int tokens, int hidden, int top_k, const int* slot_row,
                        const float* topk_weights, const int* shared_row_begin, __nv_bfloat16* out,
                        cudaStream_t stream, bool pdl = false);

// The whole MoE block. Expert weights as the checkpoint stores them (FP8 e4m3 + float32 scale_inv):
// device arrays of pointers; expert E (index num_experts) is the shared expert.
struct MoeParams {
  int tokens = 0;
  int hidden = 0;  // 6144
  int inter = 0;   // moe_intermediate_size 2048 (shared expert: the same)
  int num_experts = 0, top_k = 0, n_group = 1, topk_group = 1;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
  bool with_shared = true;
  const __nv_bfloat16* x = nullptr;  // [tokens, hidden] contiguous
  const __nv_bfloat16* router_weight = nullptr;
  const float* router_bias = nullptr;
  // [(E + 1) * 2]: entry 2e = gate_proj, 2e + 1 = up_proj of expert e ([inter, hidden] e4m3 and
  // [inter/128, hidden/128] f32).
  const uint8_t* const* gate_up_w = nullptr;
  const float* const* gate_up_s = nullptr;
  // [E + 1]: down_proj [hidden, inter] e4m3 and [hidden/128, inter/128] f32.
  const uint8_t* const* down_w = nullptr;
  const float* const* down_s = nullptr;
  __nv_bfloat16* out = nullptr;  // [tokens, hidden]
  // Optional outputs for inspection (null: kept in the workspace only).
  int* topk_ids_out = nullptr;
  float* topk_weights_out = nullptr;
  // Optional routing given by the caller (device [tokens, top_k], as moe_route writes them): when both
  // are non-null the router is skipped (router_weight / router_bias may then be null) and these are used
  // as the choice; ids outside [0, E) are dropped. For callers that route elsewhere or force the routing
  // (tests). topk_ids_out / topk_weights_out are then not written.
  const int* topk_ids_in = nullptr;
  const float* topk_weights_in = nullptr;
  // Tuning overrides (benchmarks): GEMM path and prefill tile rows (0: defaults).
  int path = 0;  // 0 automatic, 1 decode, 2 prefill
  int prefill_tile_rows = 0;
  int prefill_mma = 0;  // Fp8GemmParams::prefill_mma
  int decode_depth = 0;  // Fp8GemmParams::decode_depth
  int decode_kernel = 0;  // Fp8GemmParams::decode_kernel
  // Front (selection + permutation + quantisation): 0 automatic (one fused kernel up to 32 tokens),
  // 1 always the separate kernels (benchmarks, tests).
  int front_path = 0;
  // Programmatic dependent launch between the block's kernels (on GPUs with compute capability 9.0+).
  bool pdl = true;
  // Optional (benchmarks): 7 events recorded after route, permute, quantise, gate_up GEMM, SwiGLU,
  // down GEMM and combine; each must be a valid event. Recording works inside graph capture too.
  cudaEvent_t* stage_events = nullptr;
  // Optional (decode): the shared expert on a second stream. The shared expert needs no routing, so with
  // a stream other than `stream` and two events (created by the caller, e.g. with
  // cudaEventDisableTiming) moe_forward forks it off before the router (event 0 recorded on `stream`,
  // waited on by shared_stream), runs quantise -> gate_up -> SwiGLU -> down for the shared expert there
  // while the router and the routed experts run on `stream`, and joins before the combine (event 1).
  // The result has the same bits as the one-stream form. Graph capture turns the fork/join into parallel
  // branches (the caller's capture must include `stream`; shared_stream joins it). Used up to
  // kMoeFrontMaxTokens (32) tokens on the decode GEMM path with the shared expert; ignored otherwise.
  cudaStream_t shared_stream = nullptr;
  cudaEvent_t shared_events[2] = {nullptr, nullptr};
  // With pdl: the SwiGLU kernel lets the down GEMM launch before the gate_up GEMM has completed, and the
  // down GEMM (cp.async decode kernel) asks L2 for its first K blocks of weights before it waits, so the
  // down GEMM's weight traffic starts during the gate_up GEMM's tail. Results do not depend on it;
  // Off by default: measured slightly slower on the H200 (b9c632f, one run: T=1 0.1331 against 0.1304 ms,
  // T=8 0.575 against 0.571 ms in a CUDA graph).
  bool early_down = false;
  // Decode fusion (default 2): 1 the weighted combine runs inside the down GEMM (Fp8GemmParams::combine_*:
  // the last-arriving warp per 16 output columns sums the token's expert rows in k order; the same bits
  // as the separate combine kernel), saving the combine's launch and dependency. Applies with the fused
  // front (front_path 0), up to 2 tokens (kMoeCombineFuseMaxTokens: at T=8 it measured slower), the shared
  // expert on the main stream (not with shared_stream) and the cp.async decode kernel for the down GEMM;
  // the separate combine otherwise. 0: always the separate combine kernel (the previous form). 2: as 1, and up
  // to 2 tokens also SwiGLU + quantisation inside the down GEMM (each down block computes its rows of the
  // quantised intermediate from the gate_up output into shared memory with the SwiGLU kernel's code: the
  // same bits; one kernel and one dependency fewer).
  int decode_fusion = 2;
  // The fast front (default on; GLM5RT_MOE_FAST_FRONT=0|1 overrides): the few-token router logits kernel
  // stages x with cp.async and also quantises x (<= 16 tokens, router not skipped), and the fused front
  // kernel is the compact one (selection rounds as a loop: ~16x less code) without the quantisation. The
  // same bits. Measured on the H200 (round 5, same process): T=1 logits kernel 9.2 -> 4.6 us, front 15.1
  // -> 11.8 us after its wait, layer 0.1262 -> 0.1234 ms (graph) with evict_first; T=8 logits 25.9 -> 9.2
  // us, front 24.5 -> 15.6 us, layer 0.5708 -> 0.5439 ms. Flip: false.
  bool fast_front = true;
  // The expert GEMMs' weight streams (cp.async decode kernel, T <= 64 here) carry the evict_first L2
  // policy: read once, they give way first, so x, the router's and front's data, the kernels' code and
  // prefetched lines stay in L2. Measured on the H200 (round 5, call 1): T=1 0.1273 -> 0.1234 ms, T=8
  // 0.5780 -> 0.5720 ms in a graph; call 2 with the fast front: T=8 0.5482 -> 0.5440, T=64 2.051 -> 2.028.
  // (Part of the T=1 gain is the bench's: it replays one layer, so its router weights stay in L2 too.)
  // GLM5RT_MOE_STREAM_EVICT_FIRST=0|1 overrides it. Flip: false.
  bool stream_evict_first = true;
  // The fused front's expert selection in the fast form (RouterParams::fast_select; round 6: the compact
  // form's selection took 8.2 us of the T=1 step: loads 4.1, rounds 3.3, writes 0.8); the fused front then
  // also hands the ids to its permutation through shared memory. The same bits.
  // GLM5RT_MOE_FAST_SELECT=0|1 overrides it. On by default since the device run at df4b719 passed every
  // test with it (router bit-equal to the CPU, MoE block variants); its timing is the bench's fast-sel /
  // slow-sel rows. Flip: false.
  bool fast_select = true;
  // The permutation's single-pass form (PermuteParams::single_pass: ranks from the counting atomics, one
  // fused scan, 3 barriers instead of 5; round 7) in whichever kernel runs it (the fused front, the
  // router's last block, moe_permute). The same outputs. GLM5RT_MOE_PERMUTE_SINGLE_PASS=0|1 overrides it.
  // On by default since the H200 run at 595abea (T=1 graph 0.1160 -> 0.1140 ms, T=8 0.5353 -> 0.5329).
  // Flip: false.
  bool permute_single_pass = true;
  // Session 4 (docs/PERFORMANCE.md "MoE", "Session 4"): decode GEMM streaming knobs. Each is a hint or a
  // work split that keeps every value's bits (the same per-warp arithmetic), selectable at run time.
  // gate_up_line_copies / down_line_copies (GLM5RT_MOE_GATE_UP_LINES / GLM5RT_MOE_DOWN_LINES = 0|1): the routed
  // GEMMs' cp.async decode kernels copy whole 128-byte lines (Fp8GemmParams::decode_line_copies: every weight line
  // requested once, whole, instead of as two 64-byte halves; the same bits), also beside shared_stream. On by
  // default since the H200 run at 48a277e (docs/PERFORMANCE.md "MoE session 4, call 3"; 8-layer graph per layer):
  // T=1 0.1183 -> 0.1042 ms (77% of copy bandwidth), with the shared expert on a second stream 0.1122 -> 0.1034,
  // T=8 0.5302 -> 0.4979 ms; nearly all of it from the gate_up GEMM (gate_up alone: T=1 0.1060). Flip: false.
  bool gate_up_line_copies = true;
  bool down_line_copies = true;
  // Benchmarks only: the per-kernel timeline (kMoeStampSlots x kStampWords u64, %globaltimer min / max of
  // block start, past the PDL wait, end of work; slots below). The caller fills the min words with
  // ~0 and the max words with 0 before a run. Null: off.
  unsigned long long* debug_stamps = nullptr;
};

// Slots of MoeParams::debug_stamps.
enum MoeStampSlot {
  kMoeStampLogits = 0,
  kMoeStampFront,
  kMoeStampGateUp,
  kMoeStampSwiglu,
  kMoeStampDown,
  kMoeStampCombine,
  kMoeStampSharedGateUp,
  kMoeStampSharedSwiglu,
  kMoeStampSharedDown,
  kMoeStampLogitsStaged,  // start pair: x staged in the logits kernel's shared memory (per block)
  kMoeStampFrontPhases,   // start pair: selection done; waited pair: past the barrier before the permutation
  kMoeStampSelectPhases,  // token 0's selection in the fused front: start = logits and bias loaded, waited =
                          // group and top-k rounds done, end = ids and weights written
  kMoeStampSlots
};
constexpr int kMoeStampWords = 6;  // per slot (= detail::kStampWords)

size_t moe_workspace_size(int tokens, int hidden, int inter, int num_experts, int top_k);
cudaError_t moe_forward(const MoeParams& p, void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace glm5rt::kernels

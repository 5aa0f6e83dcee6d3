// Pieces of the MoE block that moe_forward composes but that are not part of the public interface
// (moe.h): the router's logits alone, and the fused small-batch front kernel.
#pragma once

#include <cuda_runtime.h>

#include "kernels/moe/moe.h"

namespace glm5rt::kernels {

// The router's float32 logits only (p.logits), in router_math's order; p.bias / topk_* are not used.
cudaError_t moe_router_logits(const RouterParams& p, cudaStream_t stream);
// Whether moe_router_logits runs its few-token kernel for this shape (the one that can stage x with
// cp.async and quantise it: RouterParams::stage_async / xq).
bool moe_router_small_kernel(int tokens, int hidden);

// Up to this many tokens, moe_forward runs selection + permutation + activation quantisation as one
// single-block kernel (moe_front): at decode sizes each of those is a few microseconds of launch and
// dependency, not of work.
constexpr int kMoeFrontMaxTokens = 32;

// Up to this many tokens, MoeParams::decode_fusion == 2 also computes SwiGLU + quantisation in the down
// GEMM's blocks (T rows of shared memory per block; more would cost the T=1 down GEMM its one-wave fit).
constexpr int kMoeSwigluFuseMaxTokens = 2;

// Up to this many tokens the decode fusion puts the combine inside the down GEMM. The H200 run of d58ca5c
// (graph ms, same process): T=1 0.1292 fused against 0.1332 separate, T=8 0.5886 against 0.5646 (the last
// warp's serial sum over 8 tokens x 9 rows costs more than the launch it saves), hence 2.
constexpr int kMoeCombineFuseMaxTokens = 2;

// One block: (when select) experts of every token from rp.logits into rp.topk_ids / rp.topk_weights
// (exactly as moe_route's select stage), x quantised per 128-group into xq / xs (as fp8_quantize_groups),
// then the permutation of pp (pp.topk_ids must be the ids just written, or caller-provided ids when
// select is false, e.g. forced routing). rp.tokens == pp.tokens <= kMoeFrontMaxTokens. Also sets
// zero_ints[0 .. n_zero) to 0 (the down GEMM's fused-combine counters; n_zero 0: none).
// flags: kMoeFront* below (0: the original kernel).
constexpr int kMoeFrontCompact = 1, kMoeFrontNoQuantize = 2;
cudaError_t moe_front(const RouterParams& rp, bool select, const PermuteParams& pp, uint8_t* xq, float* xs,
                      cudaStream_t stream, int* zero_ints = nullptr, int n_zero = 0, int flags = 0);

// (stamps: MoeParams::debug_stamps slot of the kernel, null: off.)
// moe_swiglu_quantize; with release_early the next kernel may launch (PDL) before this one waits for its
// predecessor (the MoE down GEMM then prefetches weights during the gate_up GEMM's tail).
cudaError_t moe_swiglu_quantize_ex(const __nv_bfloat16* gate_up, int rows, int inter, uint8_t* q, float* scale,
                                   cudaStream_t stream, bool pdl, bool release_early,
                                   unsigned long long* stamps = nullptr);

// moe_combine with the shared expert's rows given from the host: row shared_row0 + t of y is token t's
// shared-expert output when shared_row0 >= 0 and shared_row_begin is null (the shared expert on its own
// stream writes fixed rows). Same arithmetic and order as moe_combine.
cudaError_t moe_combine_at(const __nv_bfloat16* y, int tokens, int hidden, int top_k, const int* slot_row,
                           const float* topk_weights, const int* shared_row_begin, int shared_row0,
                           __nv_bfloat16* out, cudaStream_t stream, bool pdl,
                           unsigned long long* stamps = nullptr);

}  // namespace glm5rt::kernels

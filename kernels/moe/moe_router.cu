// Router: float32 logits in router_math's fixed order, then per-token sigmoid / bias / group / top-k
// selection by one warp per token with deterministic ties (lower expert id wins).
//
// The logit order (router_math.h) fixes which lane accumulates which elements and the butterfly that
// combines the lanes; within that contract two kernels:
//   few tokens (<= 16): the 3 MB gate weight must stream at full bandwidth, so one warp per expert, two
//     experts per block (128 blocks for 256 experts: every SM busy), x staged once per block in shared
//     memory, and every lane issues all of its (up to 24) 16-byte weight loads before consuming the first;
//   many tokens: FMA-bound (T x E x H fp32 fmas), so a block computes a 16-token x 16-expert tile, x and
//     the weights staged through a 3-stage cp.async ring in shared memory, each warp an 8 x 8 register
//     tile (the same 32-lane split of K, 64 accumulators per lane).
#include "kernels/gemm/fp8_common.cuh"
#include "kernels/gemm/fp8_gemm.h"
#include "kernels/gemm/launch.cuh"
#include "kernels/moe/moe.h"
#include "kernels/moe/moe_internal.h"
#include "kernels/moe/router_math.h"
#include "kernels/moe/router_select.cuh"

namespace glm5rt::kernels {
namespace {

__device__ __forceinline__ void bf16x8_to_float(const uint4& v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    f[2 * j] = __uint_as_float(w[j] << 16);
    f[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
  }
}

// Butterfly of router_math: v += v[lane ^ m], m = 16 .. 1; lane 0 holds the logit.
__device__ __forceinline__ float lane_butterfly(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

// ---- few tokens ----
constexpr int kSmallWarps = 2;   // experts per block, one per warp
constexpr int kSmallBatch = 24;  // 16-byte weight loads per lane in flight (hidden 6144: the whole row)
constexpr int kSmallMaxTokens = 16;
constexpr int kSmallSmemLimit = 48 * 1024;  // dynamic shared memory without an opt-in

// The per-token-group FP8 quantisation of x (RouterParams::xq) from the logits kernel's staged copy, one
// warp per (token, 128-group) item: the front kernel then has none of it to do. Not inlined: it runs before
// the logits loop and would otherwise crowd its registers (sm_120: the 1-token kernel at its 128-register
// allocation spilled).
__device__ __noinline__ void router_quantize_staged_x(const __nv_bfloat16* xs_staged, int tok, int t0, int tokens,
                                                      int hidden, uint8_t* xq, float* xs, int first, int step) {
  const int groups = hidden / kFp8Block;
  for (int item = first; item < tok * groups; item += step) {
    const int t = item / groups, grp = item - t * groups;
    if (t0 + t >= tokens) continue;
    detail::quantize_group_warp(xs_staged + static_cast<size_t>(t) * hidden + grp * kFp8Block,
                                xq + static_cast<size_t>(t0 + t) * hidden + grp * kFp8Block,
                                xs + static_cast<size_t>(t0 + t) * groups + grp);
  }
}

template <int TOK>
__global__ void __launch_bounds__(kSmallWarps * 32, 1) router_logits_small_kernel(const RouterParams p) {
  if (threadIdx.x == 0) detail::stamp(p.debug_stamps, detail::kStampStart);
  detail::pdl_wait_and_release();
  if (threadIdx.x == 0) detail::stamp(p.debug_stamps, detail::kStampWaited);
  extern __shared__ __align__(16) uint8_t router_smem[];
  uint4* xs = reinterpret_cast<uint4*>(router_smem);  // [TOK][chunks] bf16 x 8
  const int chunks = p.hidden / 8;
  const int t0 = blockIdx.x * TOK;
  if (p.stage_async) {
    // Every 16-byte piece of the tile in flight at once (cp.async, zero-filled past the last token): the
    // plain loop below stalls on each load before its shared-memory store, one L2 / DRAM round trip per
    // iteration (12 x TOK per thread at hidden 6144; ~8 us at T=1 on the H200 timeline of round 5).
    const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(router_smem));
    for (int i = threadIdx.x; i < TOK * chunks; i += blockDim.x) {
      const int t = i / chunks, ch = i - t * chunks;
      const bool ok = t0 + t < p.tokens;
      const uint4* src = reinterpret_cast<const uint4*>(p.x + static_cast<size_t>(ok ? t0 + t : 0) * p.ldx) + ch;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(base + 16u * i), "l"(src), "r"(ok ? 16 : 0));
    }
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::);
  } else {
    for (int i = threadIdx.x; i < TOK * chunks; i += blockDim.x) {
      const int t = i / chunks, ch = i - t * chunks;
      xs[i] = t0 + t < p.tokens ? __ldg(reinterpret_cast<const uint4*>(p.x + static_cast<size_t>(t0 + t) * p.ldx) + ch)
                                : make_uint4(0, 0, 0, 0);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0 && p.debug_stamps)
    detail::stamp(p.debug_stamps + static_cast<size_t>(kMoeStampLogitsStaged) * detail::kStampWords, detail::kStampStart);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (p.xq)
    router_quantize_staged_x(reinterpret_cast<const __nv_bfloat16*>(router_smem), TOK, t0, p.tokens, p.hidden, p.xq,
                             p.xs, blockIdx.y * kSmallWarps + warp, gridDim.y * kSmallWarps);
  const int e = blockIdx.y * kSmallWarps + warp;
  if (e >= p.num_experts) return;
  const uint4* wrow = reinterpret_cast<const uint4*>(p.weight + static_cast<size_t>(e) * p.hidden);
  float acc[TOK];
#pragma unroll
  for (int t = 0; t < TOK; ++t) acc[t] = 0.f;
  for (int base = lane; base < chunks; base += 32 * kSmallBatch) {
    uint4 wv[kSmallBatch];
#pragma unroll
    for (int j = 0; j < kSmallBatch; ++j) {
      const int ch = base + 32 * j;
      wv[j] = ch < chunks ? __ldg(wrow + ch) : make_uint4(0, 0, 0, 0);
    }
    // Consumed in increasing chunk order: the per-lane fma chain of router_math.
#pragma unroll
    for (int j = 0; j < kSmallBatch; ++j) {
      const int ch = base + 32 * j;
      if (ch < chunks) {
        float wf[8];
        bf16x8_to_float(wv[j], wf);
#pragma unroll
        for (int t = 0; t < TOK; ++t) {
          float xf[8];
          bf16x8_to_float(xs[t * chunks + ch], xf);
#pragma unroll
          for (int k = 0; k < 8; ++k) acc[t] = __fmaf_rn(xf[k], wf[k], acc[t]);
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < TOK; ++t) {
    const float v = lane_butterfly(acc[t]);
    if (lane == 0 && t0 + t < p.tokens) p.logits[static_cast<size_t>(t0 + t) * p.num_experts + e] = v;
  }
  if (lane == 0) detail::stamp(p.debug_stamps, detail::kStampEnd);
}

// ---- many tokens ----
constexpr int kBigTok = 16, kBigExp = 16, kBigWarps = 4, kBigStages = 3;
constexpr int kBigRows = kBigTok + kBigExp;              // smem rows per stage: x rows, then weight rows
constexpr int kBigRowBytes = 32 * 16;                    // one K step: 32 lanes x 8 bf16
constexpr int kBigStageBytes = kBigRows * kBigRowBytes;  // 16 KB
constexpr int kBigSmem = kBigStages * kBigStageBytes;    // 48 KB
constexpr int kBigCopies = kBigRows * 32 / (kBigWarps * 32);  // 16-byte copies per thread per stage

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

__global__ void __launch_bounds__(kBigWarps * 32, 2) router_logits_big_kernel(const RouterParams p) {
  detail::pdl_wait_and_release();
  extern __shared__ __align__(16) uint8_t router_smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int t0 = blockIdx.x * kBigTok, e0 = blockIdx.y * kBigExp;
  const int chunks = p.hidden / 8, steps = (chunks + 31) / 32;
  const uint32_t sbase = static_cast<uint32_t>(__cvta_generic_to_shared(router_smem));

  // Thread tid copies chunk `lane` of rows warp + 4 i (i < 8) of each stage.
  auto row_src = [&](int r, bool& ok) -> const __nv_bfloat16* {
    if (r < kBigTok) {
      ok = t0 + r < p.tokens;
      return p.x + static_cast<size_t>(ok ? t0 + r : 0) * p.ldx;
    }
    ok = e0 + r - kBigTok < p.num_experts;
    return p.weight + static_cast<size_t>(ok ? e0 + r - kBigTok : 0) * p.hidden;
  };
  auto load_stage = [&](int stage, int step) {
    const int ch = step * 32 + lane;
#pragma unroll
    for (int i = 0; i < kBigCopies; ++i) {
      const int r = warp + kBigWarps * i;
      bool ok;
      const __nv_bfloat16* src = row_src(r, ok);
      ok = ok && ch < chunks;
      cp_async16(sbase + stage * kBigStageBytes + r * kBigRowBytes + lane * 16,
                 reinterpret_cast<const uint4*>(src) + (ok ? ch : 0), ok ? 16 : 0);
    }
  };

  const int wt = warp / 2, we = warp % 2;  // warp tile: tokens wt*8 .. +8, experts we*8 .. +8
  float acc[8][8];
#pragma unroll
  for (int t = 0; t < 8; ++t)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[t][e] = 0.f;

#pragma unroll
  for (int s = 0; s < kBigStages - 1; ++s) {
    if (s < steps) load_stage(s, s);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  for (int step = 0; step < steps; ++step) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kBigStages - 2));
    __syncthreads();  // stage `step` visible to all; the stage refilled below is no longer read
    {
      const int nx = step + kBigStages - 1;
      if (nx < steps) load_stage(nx % kBigStages, nx);
      asm volatile("cp.async.commit_group;\n" ::);
    }
    if (step * 32 + lane < chunks) {  // lanes past the end of K add nothing (as in the CPU order)
      const uint8_t* st = router_smem + (step % kBigStages) * kBigStageBytes + lane * 16;
      float wf[8][8];
#pragma unroll
      for (int e = 0; e < 8; ++e)
        bf16x8_to_float(*reinterpret_cast<const uint4*>(st + (kBigTok + we * 8 + e) * kBigRowBytes), wf[e]);
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        float xf[8];
        bf16x8_to_float(*reinterpret_cast<const uint4*>(st + (wt * 8 + t) * kBigRowBytes), xf);
#pragma unroll
        for (int e = 0; e < 8; ++e)
#pragma unroll
          for (int k = 0; k < 8; ++k) acc[t][e] = __fmaf_rn(xf[k], wf[e][k], acc[t][e]);
      }
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::);
#pragma unroll
  for (int t = 0; t < 8; ++t)
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float v = lane_butterfly(acc[t][e]);
      const int tok = t0 + wt * 8 + t, ex = e0 + we * 8 + e;
      if (lane == 0 && tok < p.tokens && ex < p.num_experts)
        p.logits[static_cast<size_t>(tok) * p.num_experts + ex] = v;
    }
}

constexpr int kSelectWarps = 8;

__global__ void __launch_bounds__(kSelectWarps * 32) router_select_kernel(const RouterParams p) {
  detail::pdl_wait_and_release();
  __shared__ float c_sh[kSelectWarps][kRouterMaxExperts];
  const int warp = threadIdx.x / 32;
  const int t = blockIdx.x * kSelectWarps + warp;
  if (t >= p.tokens) return;
  if (p.fast_select)
    detail::router_select_token_fast(p, t, c_sh[warp]);
  else
    detail::router_select_token(p, t, c_sh[warp]);
}

bool router_params_ok(const RouterParams& p) {
  return !(p.tokens < 0 || p.hidden <= 0 || p.hidden % 8 != 0 || p.num_experts < 1 ||
           p.num_experts > kRouterMaxExperts || p.top_k < 1 || p.top_k > kRouterMaxTopK || p.top_k > p.num_experts ||
           p.n_group < 1 || p.n_group > kRouterMaxGroups || p.num_experts % p.n_group != 0 || p.topk_group < 1 ||
           p.topk_group > p.n_group || (p.n_group > 1 && p.num_experts / p.n_group < 2) || p.ldx < p.hidden ||
           p.ldx % 8 != 0);
}

template <int TOK>
cudaError_t launch_small(const RouterParams& p, cudaStream_t stream) {
  const dim3 grid((p.tokens + TOK - 1) / TOK, (p.num_experts + kSmallWarps - 1) / kSmallWarps);
  return detail::launch(router_logits_small_kernel<TOK>, grid, dim3(kSmallWarps * 32),
                        static_cast<size_t>(TOK) * p.hidden * 2, stream, p.pdl, p);
}

// moe_router_logits' checks past the shape (p.tokens > 0).
bool logits_args_ok(const RouterParams& p) {
  if (!p.x || !p.weight || !p.logits) return false;
  if ((p.xq && (!p.xs || p.hidden % kFp8Block != 0)) ||
      (p.stage_async && (reinterpret_cast<uintptr_t>(p.x) & 15u) != 0))
    return false;
  return true;
}

}  // namespace

bool moe_router_small_kernel(int tokens, int hidden) {
  return tokens >= 1 && tokens <= kSmallMaxTokens && 4 * hidden * 2 <= kSmallSmemLimit;
}

cudaError_t moe_router_logits(const RouterParams& p, cudaStream_t stream) {
  if (!router_params_ok(p)) return cudaErrorInvalidValue;
  if (p.tokens == 0) return cudaSuccess;
  if (!logits_args_ok(p)) return cudaErrorInvalidValue;
  if (moe_router_small_kernel(p.tokens, p.hidden)) {
    if (p.tokens == 1) return launch_small<1>(p, stream);
    if (p.tokens == 2) return launch_small<2>(p, stream);
    return launch_small<4>(p, stream);
  }
  if (p.xq) return cudaErrorInvalidValue;  // the quantisation exists in the few-token kernel only
  const dim3 grid((p.tokens + kBigTok - 1) / kBigTok, (p.num_experts + kBigExp - 1) / kBigExp);
  if (grid.y > 65535) return cudaErrorInvalidValue;
  return detail::launch(router_logits_big_kernel, grid, dim3(kBigWarps * 32), kBigSmem, stream, p.pdl, p);
}

cudaError_t moe_route(const RouterParams& p, cudaStream_t stream) {
  if (!router_params_ok(p)) return cudaErrorInvalidValue;
  if (p.tokens == 0) return cudaSuccess;
  if (!p.x || !p.weight || !p.bias || !p.logits || !p.topk_ids || !p.topk_weights) return cudaErrorInvalidValue;
  if (cudaError_t e = moe_router_logits(p, stream); e != cudaSuccess) return e;
  return detail::launch(router_select_kernel, dim3((p.tokens + kSelectWarps - 1) / kSelectWarps),
                        dim3(kSelectWarps * 32), 0, stream, p.pdl, p);
}

}  // namespace glm5rt::kernels

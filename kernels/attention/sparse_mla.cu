// Sparse MLA launcher: parameter checks, the split plan (flash-decoding), and the combine kernel that
// merges the per-split partial outputs with their LSEs.
#include "kernels/attention/sparse_mla.h"

#include <cuda_bf16.h>

#include <cmath>

#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels {
namespace {

using sparse_mla_detail::heads_per_cta;
using sparse_mla_detail::kTileTokens;

constexpr int kMaxSplits = 128;

bool valid_heads(int h) { return h == 8 || h == 16 || h == 32 || h == 64 || h == 128; }

int sm_count(const SparseMlaParams& p) {
  if (p.num_sms > 0) return p.num_sms;
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return 1;
  return n > 0 ? n : 1;
}

// Splits so that small T still fills the GPU. Cost model in units of one 32-token tile per CTA:
// waves * (tiles per split + 1 for the Q load and epilogue) + a small charge for the combine kernel.
int plan_splits(const SparseMlaParams& p) {
  const int ntiles = (p.topk + kTileTokens - 1) / kTileTokens;
  if (p.num_splits > 0) {
    const int want = p.num_splits < ntiles ? p.num_splits : ntiles;
    const int tps = (ntiles + want - 1) / want;
    return (ntiles + tps - 1) / tps;
  }
  const int hc = heads_per_cta(p.num_heads);
  const int64_t slots = static_cast<int64_t>(sm_count(p)) * (hc >= 32 ? 1 : 2);
  const int64_t base = static_cast<int64_t>(p.num_tokens) * (p.num_heads / hc);
  int best = 1;
  double best_cost = 1e300;
  const int max_s = ntiles < kMaxSplits ? ntiles : kMaxSplits;
  for (int s = 1; s <= max_s; ++s) {
    const int tps = (ntiles + s - 1) / s;
    const int eff = (ntiles + tps - 1) / tps;
    if (eff != s) continue;  // same work as a smaller s
    const double waves = std::ceil(static_cast<double>(base * s) / static_cast<double>(slots));
    const double cost = waves * (tps + 1.0) + (s > 1 ? 2.0 : 0.0);
    if (cost < best_cost - 1e-9) {
      best_cost = cost;
      best = s;
    }
  }
  return best;
}

__global__ void __launch_bounds__(128) sparse_mla_combine(const float* __restrict__ part_o,
                                                          const float* __restrict__ part_lse, int nsplit,
                                                          int64_t rows, __nv_bfloat16* __restrict__ out,
                                                          float* __restrict__ lse) {
  const int64_t row = blockIdx.x;  // t * H + h
  const int d = threadIdx.x * 4;
  float m = -INFINITY;
  for (int s = 0; s < nsplit; ++s) m = fmaxf(m, part_lse[s * rows + row]);
  float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
  float wsum = 0.f;
  if (m != -INFINITY) {
    for (int s = 0; s < nsplit; ++s) {
      const float ls = part_lse[s * rows + row];
      if (ls == -INFINITY) continue;  // an empty split wrote zeros; skip it entirely
      const float w = exp2f(ls - m);
      wsum += w;
      const float4 x = *reinterpret_cast<const float4*>(part_o + (s * rows + row) * kMlaLatentDim + d);
      o.x += w * x.x;
      o.y += w * x.y;
      o.z += w * x.z;
      o.w += w * x.w;
    }
    const float inv = 1.f / wsum;
    o.x *= inv;
    o.y *= inv;
    o.z *= inv;
    o.w *= inv;
  }
  __nv_bfloat162 lo = __floats2bfloat162_rn(o.x, o.y), hi = __floats2bfloat162_rn(o.z, o.w);
  uint2 packed;
  packed.x = *reinterpret_cast<uint32_t*>(&lo);
  packed.y = *reinterpret_cast<uint32_t*>(&hi);
  *reinterpret_cast<uint2*>(out + row * kMlaLatentDim + d) = packed;
  if (threadIdx.x == 0) lse[row] = m == -INFINITY ? -INFINITY : (m + log2f(wsum)) * 0.69314718055994531f;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

int sparse_mla_num_splits(const SparseMlaParams& p) {
  if (p.topk < 1 || !valid_heads(p.num_heads) || p.num_tokens < 1) return 1;
  return plan_splits(p);
}

size_t sparse_mla_workspace_size(const SparseMlaParams& p) {
  const int s = sparse_mla_num_splits(p);
  if (s <= 1) return 0;
  const size_t rows = static_cast<size_t>(s) * p.num_tokens * p.num_heads;
  return rows * kMlaLatentDim * sizeof(float) + rows * sizeof(float);
}

cudaError_t sparse_mla_forward(const SparseMlaParams& p, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream) {
  if (p.num_tokens < 0 || p.topk < 1 || !valid_heads(p.num_heads) || p.num_slots < 1 ||
      p.num_slots > 0x7fffffffLL + 1 || !std::isfinite(p.softmax_scale))
    return cudaErrorInvalidValue;
  if (p.format != MlaCacheFormat::kBf16 && p.format != MlaCacheFormat::kFp8) return cudaErrorInvalidValue;
  if (p.num_tokens == 0) return cudaSuccess;
  if (!p.q || !p.cache || !p.indices || !p.out || !p.lse) return cudaErrorInvalidValue;
  if (!aligned16(p.q) || !aligned16(p.cache) || !aligned16(p.out) || !aligned16(workspace))
    return cudaErrorInvalidValue;
  const int nsplit = sparse_mla_num_splits(p);
  const size_t need = sparse_mla_workspace_size(p);
  if (need > 0 && (workspace == nullptr || workspace_bytes < need)) return cudaErrorInvalidValue;

  sparse_mla_detail::KernelArgs a{};
  a.q = static_cast<const __nv_bfloat16*>(p.q);
  a.cache = static_cast<const uint8_t*>(p.cache);
  a.num_slots = p.num_slots;
  a.indices = p.indices;
  a.lengths = p.lengths;
  a.out = static_cast<__nv_bfloat16*>(p.out);
  a.lse = p.lse;
  a.num_tokens = p.num_tokens;
  a.num_heads = p.num_heads;
  a.topk = p.topk;
  a.nsplit = nsplit;
  const int ntiles = (p.topk + kTileTokens - 1) / kTileTokens;
  a.tiles_per_split = (ntiles + nsplit - 1) / nsplit;
  a.scale_log2 = p.softmax_scale * 1.4426950408889634f;
  const size_t rows = static_cast<size_t>(nsplit) * p.num_tokens * p.num_heads;
  if (nsplit > 1) {
    a.part_o = static_cast<float*>(workspace);
    a.part_lse = a.part_o + rows * kMlaLatentDim;
  }
  const int hc = heads_per_cta(p.num_heads);
  cudaError_t err = p.format == MlaCacheFormat::kBf16 ? sparse_mla_detail::launch_bf16(hc, a, stream)
                                                      : sparse_mla_detail::launch_fp8(hc, a, stream);
  if (err != cudaSuccess || nsplit == 1) return err;
  const int64_t out_rows = static_cast<int64_t>(p.num_tokens) * p.num_heads;
  if (out_rows > 0x7fffffff) return cudaErrorInvalidValue;
  sparse_mla_combine<<<static_cast<unsigned>(out_rows), 128, 0, stream>>>(
      a.part_o, a.part_lse, nsplit, out_rows, a.out, a.lse);
  return cudaGetLastError();
}

}  // namespace glm5rt::kernels

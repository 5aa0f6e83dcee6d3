// MoE routing (one thread per row, the CPU reference's order of operations) and the grouping of
// (row, expert) pairs into per-expert tiles for the grouped row GEMM.
#include "kernels/common/simple_device.cuh"

namespace glm5k {
namespace {

constexpr int kMaxExperts = 256;
constexpr int kMaxTopK = 32;
constexpr int kPlanThreads = 256;
constexpr int kMaxPlanExperts = 1024;

__global__ void moe_route_kernel(MoeRouteParams p) {
  const int32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= p.rows) return;
  const int32_t E = p.experts, G = p.n_group, per = E / G;
  float s[kMaxExperts], choice[kMaxExperts];
  bool kept[kMaxExperts];
  const float* lg = p.logits + static_cast<int64_t>(r) * E;
  for (int32_t e = 0; e < E; ++e) {
    s[e] = 1.0f / (1.0f + expf(-lg[e]));
    choice[e] = s[e] + p.bias[e];
    kept[e] = false;
  }
  // Groups: score = sum of the top-2 choice scores (the top one when a group has one expert); keep the
  // topk_group best (ties: lower group).
  float gscore[kMaxExperts];
  bool gkept[kMaxExperts];
  for (int32_t g = 0; g < G; ++g) {
    float best = -INFINITY, second = -INFINITY;
    for (int32_t e = g * per; e < (g + 1) * per; ++e) {
      if (choice[e] > best) {
        second = best;
        best = choice[e];
      } else if (choice[e] > second) {
        second = choice[e];
      }
    }
    gscore[g] = per >= 2 ? best + second : best;
    gkept[g] = false;
  }
  for (int32_t j = 0; j < min(G, p.topk_group); ++j) {
    int32_t bg = -1;
    for (int32_t g = 0; g < G; ++g)
      if (!gkept[g] && (bg < 0 || gscore[g] > gscore[bg])) bg = g;
    gkept[bg] = true;
  }
  for (int32_t e = 0; e < E; ++e) kept[e] = gkept[e / per];
  int32_t ids[kMaxTopK];
  int32_t k = 0;
  for (; k < p.top_k; ++k) {
    int32_t be = -1;
    for (int32_t e = 0; e < E; ++e)
      if (kept[e] && (be < 0 || choice[e] > choice[be])) be = e;
    if (be < 0) break;
    ids[k] = be;
    kept[be] = false;
  }
  float sum = 0.f;
  for (int32_t i = 0; i < k; ++i) sum += s[ids[i]];
  float wts[kMaxTopK];
  for (int32_t i = 0; i < k; ++i) {
    float wt = s[ids[i]];
    if (p.norm_topk_prob) wt /= (sum + 1e-20f);
    wts[i] = wt * p.scaling;
  }
  for (int32_t i = 1; i < k; ++i)  // insertion sort by expert id
    for (int32_t j = i; j > 0 && ids[j - 1] > ids[j]; --j) {
      const int32_t ti = ids[j];
      ids[j] = ids[j - 1];
      ids[j - 1] = ti;
      const float tw = wts[j];
      wts[j] = wts[j - 1];
      wts[j - 1] = tw;
    }
  for (int32_t i = 0; i < p.top_k; ++i) {  // fewer candidates than top_k: repeat the last with weight 0
    p.ids[static_cast<int64_t>(r) * p.top_k + i] = i < k ? ids[i] : ids[k - 1];
    p.weights[static_cast<int64_t>(r) * p.top_k + i] = i < k ? wts[i] : 0.f;
  }
}

__global__ void __launch_bounds__(kPlanThreads) moe_plan_kernel(const int32_t* ids, int32_t pairs, int32_t top_k,
                                                                int32_t experts, int32_t* pair_rows, int32_t* pair_of,
                                                                int32_t* tiles, int32_t* n_tiles) {
  __shared__ int32_t count[kMaxPlanExperts], offset[kMaxPlanExperts], tile_offset[kMaxPlanExperts];
  for (int32_t e = threadIdx.x; e < experts; e += blockDim.x) {
    int32_t c = 0;
    for (int32_t i = 0; i < pairs; ++i) c += ids[i] == e;
    count[e] = c;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t o = 0, to = 0;
    for (int32_t e = 0; e < experts; ++e) {
      offset[e] = o;
      tile_offset[e] = to;
      o += count[e];
      to += (count[e] + kRowGemmTileM - 1) / kRowGemmTileM;
    }
    *n_tiles = to;
  }
  __syncthreads();
  for (int32_t e = threadIdx.x; e < experts; e += blockDim.x) {
    int32_t at = offset[e];
    for (int32_t i = 0; i < pairs; ++i)
      if (ids[i] == e) {
        pair_rows[at] = i / top_k;
        pair_of[i] = at;
        ++at;
      }
    for (int32_t j = 0; j * kRowGemmTileM < count[e]; ++j) {
      int32_t* t = tiles + 3 * (tile_offset[e] + j);
      t[0] = e;
      t[1] = offset[e] + j * kRowGemmTileM;
      t[2] = min(kRowGemmTileM, count[e] - j * kRowGemmTileM);
    }
  }
}

}  // namespace

cudaError_t launch_moe_route(const MoeRouteParams& p, cudaStream_t stream) {
  if (p.rows <= 0) return cudaSuccess;
  if (p.experts > kMaxExperts || p.top_k > kMaxTopK || p.top_k <= 0 || p.n_group <= 0 || p.experts % p.n_group)
    return cudaErrorInvalidValue;
  moe_route_kernel<<<(p.rows + 63) / 64, 64, 0, stream>>>(p);
  return cudaGetLastError();
}

int32_t moe_max_tiles(int32_t rows, int32_t top_k, int32_t experts) {
  const int32_t pairs = rows * top_k;
  return (pairs + kRowGemmTileM - 1) / kRowGemmTileM + (experts < pairs ? experts : pairs);
}

cudaError_t launch_moe_plan(const int32_t* ids, int32_t rows, int32_t top_k, int32_t experts, int32_t* pair_rows,
                            int32_t* pair_of, int32_t* tiles, int32_t* n_tiles, int32_t max_tiles,
                            cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (experts > kMaxPlanExperts || max_tiles < moe_max_tiles(rows, top_k, experts)) return cudaErrorInvalidValue;
  moe_plan_kernel<<<1, kPlanThreads, 0, stream>>>(ids, rows * top_k, top_k, experts, pair_rows, pair_of, tiles,
                                                  n_tiles);
  return cudaGetLastError();
}

}  // namespace glm5k

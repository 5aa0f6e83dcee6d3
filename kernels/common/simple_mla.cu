// Sparse MLA in the absorbed form, simply: one block per (head, row) walks the row's selected tokens.
// Scores are q_lat . kv_t + q_rot . k_rot_t (times the softmax scale), then o_lat = sum_t p_t kv_t.
// Every head re-reads the records (through L2); kernels/attention shares them across heads.
#include "kernels/common/simple_device.cuh"

namespace glm5k {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) sparse_mla_kernel(SparseMlaParams p) {
  extern __shared__ float sm[];
  __shared__ float scratch[32];
  const int32_t h = blockIdx.x, r = blockIdx.y, kvr = p.fmt.kv_lora, rope = p.fmt.rope, lat = kvr + rope;
  float* q = sm;                    // lat
  float* sc = sm + lat;             // k scores
  auto* recs = reinterpret_cast<const char**>(sc + p.k + (p.k & 1));  // k record pointers (8-byte aligned)
  const int64_t qh = static_cast<int64_t>(r) * p.heads + h;
  for (int32_t i = threadIdx.x; i < kvr; i += blockDim.x) q[i] = p.q_lat[qh * kvr + i];
  for (int32_t i = threadIdx.x; i < rope; i += blockDim.x) q[kvr + i] = p.q_rot[qh * rope + i];
  __syncthreads();
  const int32_t n = p.n_sel[r], seq = p.batch.seq[r];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int32_t i = warp; i < n; i += nw) {
    const int32_t t = p.sel[static_cast<int64_t>(r) * p.k + i];
    const char* rec = detail::latent_record(p.batch, p.fmt, p.layer, seq, detail::slot_of(p.batch, seq, t));
    float part = 0.f;
    for (int32_t c = 2 * lane; c < lat; c += 64) {  // bf16 pairs: 128 bytes per warp load
      const float2 v = detail::latent_pair(rec, p.fmt, c);
      part += q[c] * v.x + q[c + 1] * v.y;
    }
    part = detail::warp_sum(part);
    if (lane == 0) {
      sc[i] = part * p.scale;
      recs[i] = rec;
    }
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, sc[i]);
  mx = detail::block_max(mx, scratch);
  float sum = 0.f;
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) {
    sc[i] = expf(sc[i] - mx);
    sum += sc[i];
  }
  sum = detail::block_sum(sum, scratch);  // its barriers also publish sc[]
  const float inv = 1.0f / sum;
  // o_lat: each thread owns channel pairs; tokens unrolled by 8 so that several loads are in flight.
  constexpr int kU = 8;
  for (int32_t c = 2 * threadIdx.x; c < kvr; c += 2 * blockDim.x) {
    float a0 = 0.f, a1 = 0.f;
    int32_t i = 0;
    for (; i + kU <= n; i += kU) {
      float2 v[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) v[u] = detail::latent_pair(recs[i + u], p.fmt, c);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const float pu = sc[i + u] * inv;
        a0 += pu * v[u].x;
        a1 += pu * v[u].y;
      }
    }
    for (; i < n; ++i) {
      const float2 v = detail::latent_pair(recs[i], p.fmt, c);
      const float pu = sc[i] * inv;
      a0 += pu * v.x;
      a1 += pu * v.y;
    }
    p.out[qh * kvr + c] = __float2bfloat16(a0);
    p.out[qh * kvr + c + 1] = __float2bfloat16(a1);
  }
}

}  // namespace

cudaError_t launch_sparse_mla(const SparseMlaParams& p, cudaStream_t stream) {
  if (p.batch.rows <= 0) return cudaSuccess;
  if (p.fmt.kv_lora % 4 != 0 || p.fmt.rope % 2 != 0) return cudaErrorInvalidValue;
  const size_t smem = sizeof(float) * (p.fmt.kv_lora + p.fmt.rope + p.k + (p.k & 1)) + sizeof(char*) * p.k;
  if (smem > 200 * 1024) return cudaErrorInvalidValue;
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(sparse_mla_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  sparse_mla_kernel<<<dim3(p.heads, p.batch.rows), kThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace glm5k

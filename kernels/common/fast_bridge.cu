// Adapters between the backend's buffers and the fast kernel families (fast_bridge.cuh).
#include "kernels/common/fast_bridge.cuh"
#include "kernels/common/simple_device.cuh"

namespace glm5k {
namespace {

__global__ void pack_mla_query_kernel(const float* q_lat, const float* q_rot, int32_t heads, int32_t kvr, int32_t rope,
                                      __nv_bfloat16* out) {
  const int64_t rh = blockIdx.x;  // row * heads + head
  const int32_t w = kvr + rope;
  __nv_bfloat16* o = out + rh * w;
  for (int32_t i = threadIdx.x; i < w; i += blockDim.x)
    o[i] = __float2bfloat16(i < kvr ? q_lat[rh * kvr + i] : q_rot[rh * rope + (i - kvr)]);
}

__global__ void positions_to_slots_kernel(const int32_t* sel, BatchRows b, int32_t k, int32_t* slots) {
  const int64_t at = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (at >= static_cast<int64_t>(b.rows) * k) return;
  const int32_t r = static_cast<int32_t>(at / k);
  const int32_t pos = sel[at];
  slots[at] = pos >= 0 ? static_cast<int32_t>(detail::slot_of(b, b.seq[r], pos)) : -1;
}

// One warp per (row, head).
__global__ void indexer_query_kernel(const float* qi, int64_t n_heads_total, int32_t dim, bool fp8, void* q_out,
                                     float* q_scale) {
  const int64_t rh = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (rh >= n_heads_total) return;
  detail::indexer_query_head(qi + rh * dim, dim, fp8, q_out, q_scale, rh);
}

}  // namespace

cudaError_t launch_pack_mla_query(const float* q_lat, const float* q_rot, int32_t rows, int32_t heads, int32_t kv_lora,
                                  int32_t rope, __nv_bfloat16* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (heads <= 0 || kv_lora <= 0 || rope < 0 || static_cast<int64_t>(rows) * heads > 0x7fffffff)
    return cudaErrorInvalidValue;
  pack_mla_query_kernel<<<rows * heads, 128, 0, stream>>>(q_lat, q_rot, heads, kv_lora, rope, out);
  return cudaGetLastError();
}

cudaError_t launch_positions_to_slots(const int32_t* sel, const BatchRows& batch, int32_t k, int32_t* slots,
                                      cudaStream_t stream) {
  if (batch.rows <= 0) return cudaSuccess;
  if (k <= 0) return cudaErrorInvalidValue;
  const int64_t total = static_cast<int64_t>(batch.rows) * k;
  positions_to_slots_kernel<<<static_cast<unsigned>((total + 255) / 256), 256, 0, stream>>>(sel, batch, k, slots);
  return cudaGetLastError();
}

cudaError_t launch_indexer_query(const float* qi, int32_t rows, int32_t heads, int32_t dim, bool fp8, void* q_out,
                                 float* q_scale, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (heads <= 0 || dim <= 0 || (fp8 && !q_scale)) return cudaErrorInvalidValue;
  const int64_t total = static_cast<int64_t>(rows) * heads;
  const int warps = 8;
  indexer_query_kernel<<<static_cast<unsigned>((total + warps - 1) / warps), 32 * warps, 0, stream>>>(qi, total, dim, fp8,
                                                                                                    q_out, q_scale);
  return cudaGetLastError();
}

}  // namespace glm5k

#include "kernels/common/moe_bridge.cuh"

namespace glm5k {
namespace {

constexpr int kThreads = 256;

// 8 bf16 (16 bytes) per thread where aligned; the tail one at a time.
__global__ void bf16_to_f32_kernel(const __nv_bfloat16* __restrict__ in, int64_t n, float* __restrict__ out) {
  const int64_t i8 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i8 + 8 <= n) {
    const uint4 v = *reinterpret_cast<const uint4*>(in + i8);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
    float4 a, b;
    a.x = __low2float(h[0]);
    a.y = __high2float(h[0]);
    a.z = __low2float(h[1]);
    a.w = __high2float(h[1]);
    b.x = __low2float(h[2]);
    b.y = __high2float(h[2]);
    b.z = __low2float(h[3]);
    b.w = __high2float(h[3]);
    *reinterpret_cast<float4*>(out + i8) = a;
    *reinterpret_cast<float4*>(out + i8 + 4) = b;
  } else {
    for (int64_t i = i8; i < n; ++i) out[i] = __bfloat162float(in[i]);
  }
}

__global__ void sum_slices_kernel(const __nv_bfloat16* __restrict__ in, int32_t slices, int64_t n,
                                  float* __restrict__ out) {
  const int64_t i8 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i8 >= n) return;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int cnt = i8 + 8 <= n ? 8 : static_cast<int>(n - i8);
  for (int32_t s = 0; s < slices; ++s) {
    const __nv_bfloat16* src = in + s * n + i8;
    if (cnt == 8 && (n % 8) == 0) {  // 16-byte aligned rows of the slices
      const uint4 v = *reinterpret_cast<const uint4*>(src);
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        acc[2 * j] += __low2float(h[j]);
        acc[2 * j + 1] += __high2float(h[j]);
      }
    } else {
      for (int j = 0; j < cnt; ++j) acc[j] += __bfloat162float(src[j]);
    }
  }
  for (int j = 0; j < cnt; ++j) out[i8 + j] = acc[j];
}

__global__ void f32_to_bf16_kernel(const float* __restrict__ in, int64_t n, __nv_bfloat16* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(in[i]);
}

}  // namespace

cudaError_t launch_bf16_to_f32(const __nv_bfloat16* in, int64_t n, float* out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  // The vector path needs 16-byte aligned starts: both buffers come from 256-byte aligned carvings.
  if ((reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out)) % 16 != 0) return cudaErrorInvalidValue;
  const int64_t threads = (n + 7) / 8;
  bf16_to_f32_kernel<<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0, stream>>>(in, n, out);
  return cudaGetLastError();
}

cudaError_t launch_sum_slices_bf16_to_f32(const __nv_bfloat16* in, int32_t slices, int64_t n, float* out,
                                          cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (slices < 1 || reinterpret_cast<uintptr_t>(in) % 16 != 0) return cudaErrorInvalidValue;
  const int64_t threads = (n + 7) / 8;
  sum_slices_kernel<<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0, stream>>>(in, slices, n,
                                                                                                        out);
  return cudaGetLastError();
}

cudaError_t launch_f32_to_bf16(const float* in, int64_t n, __nv_bfloat16* out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  f32_to_bf16_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(in, n, out);
  return cudaGetLastError();
}

}  // namespace glm5k

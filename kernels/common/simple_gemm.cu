// A simple row GEMM with float32 accumulation: every thread owns one output feature n and up to
// kRowGemmTileM rows, streaming its weight row (f32, bf16 or FP8 with block scales). Used for the MoE
// experts (grouped, rows gathered by a device-side tile list), the float32 router, the per-head
// absorbed-attention products and as the fallback of cuBLASLt. CUDA cores only: kernels/gemm and
// kernels/moe bring the tensor-core versions.
#include "kernels/common/simple_device.cuh"

namespace glm5k {
namespace {

constexpr int kThreads = 128;  // output features per block
constexpr int kChunk = 64;     // k values staged per step
constexpr int kTM = kRowGemmTileM;

__device__ inline float weight_at(const void* w, int32_t dtype, int64_t i) {
  if (dtype == kWBf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(w)[i]);
  if (dtype == kWFp8) return detail::e4m3_to_float(static_cast<const uint8_t*>(w)[i]);
  return static_cast<const float*>(w)[i];
}

// 16 consecutive weights starting at a 16-byte aligned address.
__device__ inline void load16(const char* ptr, int32_t dtype, float* out) {
  if (dtype == kWFp8) {
    const uint4 v = *reinterpret_cast<const uint4*>(ptr);
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 16; ++i) out[i] = detail::e4m3_to_float(static_cast<uint8_t>(words[i / 4] >> (8 * (i % 4))));
  } else if (dtype == kWBf16) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4 v = reinterpret_cast<const uint4*>(ptr)[h];
      const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        out[h * 8 + 2 * i] = __uint_as_float(words[i] << 16);
        out[h * 8 + 2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
      }
    }
  } else {
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const float4 v = reinterpret_cast<const float4*>(ptr)[h];
      out[4 * h] = v.x;
      out[4 * h + 1] = v.y;
      out[4 * h + 2] = v.z;
      out[4 * h + 3] = v.w;
    }
  }
}

__global__ void __launch_bounds__(kThreads) row_gemm_kernel(RowGemmParams p) {
  __shared__ float as[kTM][kChunk + 1];
  __shared__ int32_t arow[kTM];
  int32_t group = 0, row0, count;
  if (p.tiles) {
    if (static_cast<int32_t>(blockIdx.y) >= *p.n_tiles) return;
    group = p.tiles[3 * blockIdx.y];
    row0 = p.tiles[3 * blockIdx.y + 1];
    count = p.tiles[3 * blockIdx.y + 2];
  } else {
    row0 = blockIdx.y * kTM;
    count = min(kTM, p.m - row0);
    if (count <= 0) return;
  }
  const int64_t z = blockIdx.z;
  const char* a_base = static_cast<const char*>(p.a) + z * p.a_batch_stride * (p.a_bf16 ? 2 : 4);
  const int32_t wsize = p.w_dtype == kWF32 ? 4 : p.w_dtype == kWBf16 ? 2 : 1;
  const void* w = static_cast<const char*>(p.w) + (z * p.w_batch_stride + group * p.w_group_stride) * wsize;
  const float* scale = p.scale ? p.scale + group * p.scale_group_stride : nullptr;
  if (threadIdx.x < kTM)
    arow[threadIdx.x] = static_cast<int32_t>(threadIdx.x) < count
                           ? (p.a_rows ? p.a_rows[row0 + threadIdx.x] : row0 + static_cast<int32_t>(threadIdx.x))
                           : -1;
  const int32_t n = blockIdx.x * kThreads + threadIdx.x;
  // Vector path: 16-byte aligned rows, and (FP8) one scale per 64-value chunk.
  const bool vec = (reinterpret_cast<uintptr_t>(w) % 16 == 0) && ((p.ldw * wsize) % 16 == 0) &&
                   (p.w_dtype != kWFp8 || p.block_k % kChunk == 0);
  float acc[kTM];
#pragma unroll
  for (int m = 0; m < kTM; ++m) acc[m] = 0.f;
  for (int32_t k0 = 0; k0 < p.k; k0 += kChunk) {
    __syncthreads();
    for (int i = threadIdx.x; i < kTM * kChunk; i += kThreads) {
      const int m = i / kChunk, kk = i % kChunk;
      float v = 0.f;
      if (arow[m] >= 0 && k0 + kk < p.k) {
        const int64_t idx = static_cast<int64_t>(arow[m]) * p.lda + k0 + kk;
        v = p.a_bf16 ? __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(a_base)[idx])
                     : reinterpret_cast<const float*>(a_base)[idx];
      }
      as[m][kk] = v;
    }
    __syncthreads();
    if (n >= p.n) continue;
    const int32_t kend = min(kChunk, p.k - k0);
    const int64_t wrow = static_cast<int64_t>(n) * p.ldw;
    if (vec && kend == kChunk) {
      // 16-byte weight loads, 16 values at a time, everything unrolled (registers only).
      const float s = p.w_dtype == kWFp8 ? scale[(n / p.block_n) * p.ld_scale + k0 / p.block_k] : 1.f;
      const char* wp = static_cast<const char*>(w) + (wrow + k0) * wsize;
#pragma unroll
      for (int g = 0; g < kChunk / 16; ++g) {
        float wv[16];
        load16(wp + g * 16 * wsize, p.w_dtype, wv);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const float x = wv[j] * s;
#pragma unroll
          for (int m = 0; m < kTM; ++m) acc[m] += as[m][g * 16 + j] * x;
        }
      }
      continue;
    }
    for (int32_t kk = 0; kk < kend; ++kk) {
      float wv = weight_at(w, p.w_dtype, wrow + k0 + kk);
      if (p.w_dtype == kWFp8) wv *= scale[(n / p.block_n) * p.ld_scale + (k0 + kk) / p.block_k];
#pragma unroll
      for (int m = 0; m < kTM; ++m) acc[m] += as[m][kk] * wv;
    }
  }
  if (n >= p.n) return;
  for (int m = 0; m < count; ++m) {
    const int64_t idx = z * p.c_batch_stride + static_cast<int64_t>(row0 + m) * p.ldc + n;
    if (p.c_bf16) static_cast<__nv_bfloat16*>(p.c)[idx] = __float2bfloat16(acc[m]);
    else static_cast<float*>(p.c)[idx] = acc[m];
  }
}

}  // namespace

cudaError_t launch_row_gemm(const RowGemmParams& p, cudaStream_t stream) {
  if (p.n <= 0 || p.batch <= 0) return cudaSuccess;
  if (p.w_dtype == kWFp8 && (!p.scale || p.block_n <= 0 || p.block_k <= 0)) return cudaErrorInvalidValue;
  int32_t y;
  if (p.tiles) {
    if (!p.n_tiles) return cudaErrorInvalidValue;
    y = p.max_tiles;
  } else {
    y = (p.m + kTM - 1) / kTM;
  }
  if (y <= 0) return cudaSuccess;
  const dim3 grid((p.n + kThreads - 1) / kThreads, y, p.batch);
  row_gemm_kernel<<<grid, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace glm5k

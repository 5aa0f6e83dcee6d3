// Per-head absorbed products at decode sizes (absorbed_heads.cuh).
#include "kernels/common/absorbed_heads.cuh"
#include "kernels/gemm/launch.cuh"

namespace glm5k {
namespace {

constexpr int kThreads = 256;
// kLanes lanes share one output feature, each step covering kLanes x 16 bytes = kLanes x 8 bf16 of k:
// 8 lanes (32 outputs per block) for k = 64, 128, 192 (W_UK: k = 192, 3 steps), 16 lanes (16 outputs
// per block) for k = 256, 384, 512 (W_UV: k = 512, 4 steps), so that no lane holds more than 4 x 16
// bytes of weights (<= 64 registers without spills at 4 blocks per SM).

__device__ __forceinline__ float lo_bf16(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_bf16(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// 8 float32 values rounded to bf16 and packed as dot8's input (the low half of each word first).
__device__ __forceinline__ uint4 pack8_bf16(const float4& u, const float4& v) {
  auto pk = [](float lo, float hi) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);  // .x = lo (low 16 bits), .y = hi
    return *reinterpret_cast<const uint32_t*>(&b);
  };
  return make_uint4(pk(u.x, u.y), pk(u.z, u.w), pk(v.x, v.y), pk(v.z, v.w));
}

__device__ __forceinline__ float dot8(const uint4& x, const uint4& y, float acc) {
  acc = fmaf(lo_bf16(x.x), lo_bf16(y.x), acc);
  acc = fmaf(hi_bf16(x.x), hi_bf16(y.x), acc);
  acc = fmaf(lo_bf16(x.y), lo_bf16(y.y), acc);
  acc = fmaf(hi_bf16(x.y), hi_bf16(y.y), acc);
  acc = fmaf(lo_bf16(x.z), lo_bf16(y.z), acc);
  acc = fmaf(hi_bf16(x.z), hi_bf16(y.z), acc);
  acc = fmaf(lo_bf16(x.w), lo_bf16(y.w), acc);
  acc = fmaf(hi_bf16(x.w), hi_bf16(y.w), acc);
  return acc;
}

// grid (ceil(n / (kThreads / kLanes)), heads). kSteps = k / (8 kLanes).
template <int kLanes, int kSteps>
__global__ void __launch_bounds__(kThreads, 4) absorbed_heads_kernel(AbsorbedHeadsParams p) {
  constexpr int kLanesPerOutput = kLanes;
  const int h = blockIdx.y;
  const int sub = threadIdx.x % kLanesPerOutput;
  const int j = blockIdx.x * (kThreads / kLanes) + threadIdx.x / kLanesPerOutput;
  const bool active = j < p.n;
  uint4 wv[kSteps];
  if (active) {
    // Weights are static: stream them before waiting for the kernel that writes `a`.
    const uint4* wrow = reinterpret_cast<const uint4*>(p.w + (static_cast<int64_t>(h) * p.n + j) * p.k);
#pragma unroll
    for (int s = 0; s < kSteps; ++s) wv[s] = __ldcs(wrow + s * kLanesPerOutput + sub);
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (p.pdl) asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  if (p.tail && blockIdx.x == 0) {
    const int half = p.tail_n / 2;
    for (int i = threadIdx.x; i < p.rows * half; i += kThreads) {  // one interleaved pair per step
      const int r = i / half, t = i % half;
      const float* src = p.tail + r * p.tail_ld + h * p.tail_head_stride + 2 * t;
      float x0 = src[0], x1 = src[1];
      if (p.tail_cos) {
        const float c = p.tail_cos[r * half + t], s = p.tail_sin[r * half + t];
        const float a0 = x0, b0 = x1;
        x0 = a0 * c - b0 * s;
        x1 = b0 * c + a0 * s;
      }
      __nv_bfloat16* dst = p.c + r * p.ldc + h * p.c_head_stride + p.n + 2 * t;
      dst[0] = __float2bfloat16(x0);
      dst[1] = __float2bfloat16(x1);
    }
  }
  for (int r = 0; r < p.rows; ++r) {
    float acc = 0.f;
    if (active) {
      if (p.a_f32) {
        const float4* arow = reinterpret_cast<const float4*>(p.a_f32 + r * p.lda + h * p.a_head_stride);
#pragma unroll
        for (int s = 0; s < kSteps; ++s) {
          const int at = 2 * (s * kLanesPerOutput + sub);
          acc = dot8(pack8_bf16(arow[at], arow[at + 1]), wv[s], acc);
        }
      } else {
        const uint4* arow = reinterpret_cast<const uint4*>(p.a + r * p.lda + h * p.a_head_stride);
#pragma unroll
        for (int s = 0; s < kSteps; ++s) acc = dot8(arow[s * kLanesPerOutput + sub], wv[s], acc);
      }
    }
    // All lanes take part (active is uniform within each group of kLanes lanes, not within the warp).
    if (kLanes == 16) acc += __shfl_xor_sync(0xffffffffu, acc, 8);
    acc += __shfl_xor_sync(0xffffffffu, acc, 4);
    acc += __shfl_xor_sync(0xffffffffu, acc, 2);
    acc += __shfl_xor_sync(0xffffffffu, acc, 1);
    if (active && sub == 0) p.c[r * p.ldc + h * p.c_head_stride + j] = __float2bfloat16(acc);
  }
}

template <int kLanes, int kSteps>
cudaError_t launch_steps(const AbsorbedHeadsParams& p, cudaStream_t stream) {
  constexpr int outputs = kThreads / kLanes;
  return glm5rt::kernels::detail::launch(absorbed_heads_kernel<kLanes, kSteps>, dim3((p.n + outputs - 1) / outputs, p.heads),
                                        dim3(kThreads), 0, stream, p.pdl, p);
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

// 320 and 448 would need 5 / 7 steps of 8 lanes (spills at 64 registers) or fractional steps of 16.
bool absorbed_heads_supported(int32_t k) { return k > 0 && k % 64 == 0 && k <= 512 && k != 320 && k != 448; }

cudaError_t launch_absorbed_heads(const AbsorbedHeadsParams& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.heads <= 0 || p.n <= 0) return cudaSuccess;
  const int64_t per16 = p.a ? 8 : 4;  // elements per 16 bytes of a row
  const void* a = p.a ? static_cast<const void*>(p.a) : static_cast<const void*>(p.a_f32);
  if (!absorbed_heads_supported(p.k) || !a || !p.w || !p.c || !aligned16(a) || !aligned16(p.w) ||
      p.lda % per16 != 0 || p.a_head_stride % per16 != 0 || p.heads > 65535 ||
      (p.tail && (p.tail_n <= 0 || p.tail_n % 2 != 0)) || (p.tail_cos && !p.tail_sin))
    return cudaErrorInvalidValue;
  switch (p.k / 64) {  // k in 64-value units
    case 1: return launch_steps<8, 1>(p, stream);
    case 2: return launch_steps<8, 2>(p, stream);
    case 3: return launch_steps<8, 3>(p, stream);
    case 4: return launch_steps<16, 2>(p, stream);
    case 6: return launch_steps<16, 3>(p, stream);  // 4 (256) above; 5 and 7 are rejected
    default: return launch_steps<16, 4>(p, stream);
  }
}

}  // namespace glm5k

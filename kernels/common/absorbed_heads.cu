// Per-head absorbed products at decode sizes (absorbed_heads.cuh).
#include "kernels/common/absorbed_heads.cuh"

namespace glm5k {
namespace {

constexpr int kThreads = 256;
// kLanes lanes share one output feature, each step covering kLanes x 16 bytes = kLanes x 8 bf16 of k:
// 8 lanes (32 outputs per block) where k is small or not a multiple of 128 (W_UK: k = 192, 3 steps),
// 16 lanes (16 outputs per block) from k = 256 on (W_UV: k = 512, 4 steps), so that no lane holds more
// than 5 x 16 bytes of weights (<= 64 registers without spills at 4 blocks per SM).

__device__ __forceinline__ float lo_bf16(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_bf16(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

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
    for (int i = threadIdx.x; i < p.rows * p.tail_n; i += kThreads) {
      const int r = i / p.tail_n, t = i % p.tail_n;
      p.c[r * p.ldc + h * p.c_head_stride + p.n + t] =
          __float2bfloat16(p.tail[(static_cast<int64_t>(r) * p.heads + h) * p.tail_n + t]);
    }
  }
  for (int r = 0; r < p.rows; ++r) {
    float acc = 0.f;
    if (active) {
      const uint4* arow = reinterpret_cast<const uint4*>(p.a + r * p.lda + h * p.a_head_stride);
#pragma unroll
      for (int s = 0; s < kSteps; ++s) acc = dot8(arow[s * kLanesPerOutput + sub], wv[s], acc);
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
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3((p.n + outputs - 1) / outputs, p.heads);
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = p.pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, absorbed_heads_kernel<kLanes, kSteps>, p);
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

// 448 would need 7 steps of 8 lanes (spills) or 3.5 of 16: not supported.
bool absorbed_heads_supported(int32_t k) { return k > 0 && k % 64 == 0 && k <= 512 && k != 448; }

cudaError_t launch_absorbed_heads(const AbsorbedHeadsParams& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.heads <= 0 || p.n <= 0) return cudaSuccess;
  if (!absorbed_heads_supported(p.k) || !p.a || !p.w || !p.c || !aligned16(p.a) || !aligned16(p.w) ||
      p.lda % 8 != 0 || p.a_head_stride % 8 != 0 || p.heads > 65535 || (p.tail && p.tail_n <= 0))
    return cudaErrorInvalidValue;
  switch (p.k / 64) {  // k in 64-value units
    case 1: return launch_steps<8, 1>(p, stream);
    case 2: return launch_steps<8, 2>(p, stream);
    case 3: return launch_steps<8, 3>(p, stream);
    case 4: return launch_steps<16, 2>(p, stream);
    case 5: return launch_steps<8, 5>(p, stream);
    case 6: return launch_steps<16, 3>(p, stream);
    default: return launch_steps<16, 4>(p, stream);
  }
}

}  // namespace glm5k

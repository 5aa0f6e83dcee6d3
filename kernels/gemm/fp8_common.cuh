// Device helpers shared by the FP8 kernels: warp-level FP8 e4m3 mma.sync, ldmatrix, cp.async, and the
// per-token-group quantisation rule. Only the kernels' .cu files include this.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace glm5rt::kernels::detail {

// FP8 mma.sync (m16n8k32, e4m3 x e4m3 -> f32) exists from sm_89 on (Ada, Hopper, Blackwell incl. SM120).
// On sm_80 the kernels compile to nothing and the launchers refuse with cudaErrorNotSupported.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define GLM5RT_HAS_FP8_MMA 1
#else
#define GLM5RT_HAS_FP8_MMA 0
#endif

// d += a * b for one m16n8k32 tile. a: 4 regs (16x32 e4m3, row), b: 2 regs (32x8 e4m3, col), d: 4 f32.
__device__ __forceinline__ void mma_e4m3_16832(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                               uint32_t a3, uint32_t b0, uint32_t b1) {
#if GLM5RT_HAS_FP8_MMA
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  (void)d; (void)a0; (void)a1; (void)a2; (void)a3; (void)b0; (void)b1;
#endif
}

// d += a * b, m16n8k16 f16 x f16 -> f32 (a: 4 x f16x2, b: 2 x f16x2).
__device__ __forceinline__ void mma_f16_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                              uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Two e4m3 (low byte first) to f16x2, exactly (every e4m3 value is an f16 value). sm_89+.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint16_t v) {
#if GLM5RT_HAS_FP8_MMA
  uint32_t r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(r) : "h"(v));
  return r;
#else
  (void)v;
  return 0;
#endif
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                            uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

// 16-byte async copy global -> shared; src_bytes 0 fills the destination with zeros (rows past the end).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
// The same with an L2 cache policy (createpolicy; sm_80+), e.g. evict_first for weights read once.
__device__ __forceinline__ void cp_async_16_hint(uint32_t dst, const void* src, int src_bytes, uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes), "l"(policy));
#else
  (void)policy;
  cp_async_16(dst, src, src_bytes);
#endif
}
__device__ __forceinline__ uint64_t l2_policy_evict_first() {
  uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
#endif
  return policy;
}
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Hint: bring the line holding p into L2 (no register, no completion to wait for).
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

// Streaming 16-byte load that does not keep the line in L1: weights are read exactly once.
__device__ __forceinline__ uint4 ldg_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// The per-token-group quantisation rule (must match the CPU reference in the tests bit for bit):
// scale = max(amax, 1e-10) / 448, q = e4m3_satfinite_rn(x / scale).
constexpr float kFp8Max = 448.0f;
__device__ __forceinline__ float fp8_group_scale(float amax) { return fmaxf(amax, 1e-10f) / kFp8Max; }
__device__ __forceinline__ uint8_t fp8_encode(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

// One warp quantises one 128-wide group: src = its 128 bf16, q = its 128 e4m3 bytes, *scale = the
// group's scale (lane 0 writes it). Lane l owns elements 4l .. 4l+3.
__device__ __forceinline__ void quantize_group_warp(const __nv_bfloat16* src, uint8_t* q, float* scale) {
  const int lane = threadIdx.x % 32;
  const uint2 raw = *reinterpret_cast<const uint2*>(src + lane * 4);
  const __nv_bfloat162 p0 = *reinterpret_cast<const __nv_bfloat162*>(&raw.x);
  const __nv_bfloat162 p1 = *reinterpret_cast<const __nv_bfloat162*>(&raw.y);
  const float v[4] = {__low2float(p0), __high2float(p0), __low2float(p1), __high2float(p1)};
  float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
  amax = warp_max(amax);
  const float s = fp8_group_scale(amax);
  uint32_t packed = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) packed |= static_cast<uint32_t>(fp8_encode(v[i] / s)) << (8 * i);
  *reinterpret_cast<uint32_t*>(q + lane * 4) = packed;
  if (lane == 0) *scale = s;
}

// SwiGLU + quantisation of one 128-wide group of the MoE intermediate, one warp: g / u = the group's 128
// bf16 gate / up values, lane l owns elements 4l .. 4l+3; returns the lane's 4 e4m3 bytes packed and the
// group's scale in *s. h = silu(g) * u = g / (1 + exp(-g)) * u in float32. The one definition used by the
// SwiGLU kernel (moe_swiglu_quantize) and by the down GEMM's fused prologue, so both give the same bits.
__device__ __forceinline__ uint32_t swiglu_quantize_group_warp(const __nv_bfloat16* g, const __nv_bfloat16* u,
                                                               float* s) {
  const int lane = threadIdx.x % 32;
  const uint2 graw = *reinterpret_cast<const uint2*>(g + lane * 4);
  const uint2 uraw = *reinterpret_cast<const uint2*>(u + lane * 4);
  const __nv_bfloat162* gp = reinterpret_cast<const __nv_bfloat162*>(&graw);
  const __nv_bfloat162* up = reinterpret_cast<const __nv_bfloat162*>(&uraw);
  float h[4];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float2 gf = __bfloat1622float2(gp[i]), uf = __bfloat1622float2(up[i]);
    // Explicitly rounded operations: no FMA contraction that could differ between the two kernels that
    // inline this (the fused prologue's result must have the SwiGLU kernel's bits).
    h[2 * i] = __fmul_rn(__fdiv_rn(gf.x, __fadd_rn(1.0f, expf(-gf.x))), uf.x);
    h[2 * i + 1] = __fmul_rn(__fdiv_rn(gf.y, __fadd_rn(1.0f, expf(-gf.y))), uf.y);
  }
  float amax = fmaxf(fmaxf(fabsf(h[0]), fabsf(h[1])), fmaxf(fabsf(h[2]), fabsf(h[3])));
  amax = warp_max(amax);
  *s = fp8_group_scale(amax);
  uint32_t packed = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) packed |= static_cast<uint32_t>(fp8_encode(h[i] / *s)) << (8 * i);
  return packed;
}

}  // namespace glm5rt::kernels::detail

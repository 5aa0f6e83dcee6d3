// Router arithmetic shared bit for bit by the GPU kernel and any CPU reference: the logit dot product's
// summation order and a sigmoid built only from IEEE-exact operations (fma, add, multiply, divide), so
// that host and device compute identical floats and therefore identical expert choices, ties included.
// (expf differs in the last bit between CUDA and libm; that would let near-ties pick different experts.)
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GLM5RT_HD __host__ __device__ __forceinline__
#else
#define GLM5RT_HD inline
#endif

namespace glm5rt::kernels::router_math {

GLM5RT_HD float fma_f(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

GLM5RT_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// exp(x) for x <= 0 (the sigmoid only needs e^-|x|), within ~2 ulp: x = n ln2 + r, |r| <= ln2/2,
// degree-7 Taylor/Horner polynomial in r, then 2^n by exponent arithmetic (two steps keep 2^n normal).
GLM5RT_HD float exp_nonpositive(float x) {
  if (!(x > -104.0f)) return x != x ? x : 0.0f;  // NaN stays NaN; far underflow -> 0
  const float n = rintf(x * 1.44269504088896341f);
  float r = fma_f(n, -0.693145751953125f, x);  // ln2 split in a head exact in 16 bits and a tail
  r = fma_f(n, -1.428606765330187045e-06f, r);
  float p = 1.0f / 5040.0f;
  p = fma_f(p, r, 1.0f / 720.0f);
  p = fma_f(p, r, 1.0f / 120.0f);
  p = fma_f(p, r, 1.0f / 24.0f);
  p = fma_f(p, r, 1.0f / 6.0f);
  p = fma_f(p, r, 0.5f);
  p = fma_f(p, r, 1.0f);
  p = fma_f(p, r, 1.0f);
  const int ni = static_cast<int>(n);  // in [-150, 0]
  const int n1 = ni / 2, n2 = ni - n1;
  return p * bits_to_float(static_cast<uint32_t>(127 + n1) << 23) * bits_to_float(static_cast<uint32_t>(127 + n2) << 23);
}

// sigmoid(x) = 1 / (1 + e^-x), evaluated through e^-|x| so that nothing overflows.
GLM5RT_HD float sigmoid(float x) {
  if (x != x) return x;
  const float e = exp_nonpositive(-fabsf(x));
  return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

// The router logit's summation order for hidden size k (multiple of 8): 32 lanes, lane l owns the
// 8-element chunks starting at 8 * (l + 32 * i); each lane accumulates its elements in order with fma,
// then the lanes are combined by the butterfly v += v[lane ^ m] for m = 16, 8, 4, 2, 1.
constexpr int kLogitLanes = 32;

}  // namespace glm5rt::kernels::router_math

// Random inputs of the sparse MLA benchmarks (sparse_mla_bench, mla_timeline, mla_item_timeline): bf16 values uniform
// in (-1, 1) (queries, bf16 records) and 656-byte FP8 records (random e4m3 latent bytes without the NaN codes, block scales in
// [1e-3, 1e-2], bf16 rope), filled on the device from a seed. (static: the kernels are local to each benchmark; nvcc
// ignores `inline` on a kernel.)
#pragma once

#include <cstddef>
#include <cstdint>

#include "bench/common/bench_cuda.cuh"

namespace glm5rt_bench {

__device__ inline uint16_t rand_bf16(uint64_t key) {  // uniform in (-1, 1), as bf16 bits
  const float v = (hash32(key) >> 8) * (2.f / 16777216.f) - 1.f;
  uint32_t u = __float_as_uint(v);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static __global__ void fill_mla_bf16(uint16_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = rand_bf16(seed * 0x9e3779b97f4a7c15ULL + i);
}

static __global__ void fill_mla_fp8_records(uint8_t* p, size_t num_slots, uint64_t seed) {
  const size_t n = num_slots * 656;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t off = i % 656;
    const uint32_t h = hash32(seed * 0x9e3779b97f4a7c15ULL + i);
    if (off < 512) {
      uint8_t b = static_cast<uint8_t>(h);
      if ((b & 0x7f) == 0x7f) b ^= 1;
      p[i] = b;
    } else if (off < 528) {
      if ((off & 3) == 0) {
        const float s = 1e-3f + (h >> 8) * (9e-3f / 16777216.f);
        *reinterpret_cast<float*>(p + i) = s;
      }
    } else if ((off & 1) == 0) {
      *reinterpret_cast<uint16_t*>(p + i) = rand_bf16(seed + i);
    }
  }
}

}  // namespace glm5rt_bench

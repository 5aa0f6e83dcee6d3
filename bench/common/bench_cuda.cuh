// Shared by the CUDA benchmarks in bench/: a check that stops a benchmark on the first CUDA error (a
// benchmark has nothing to recover; the library itself never exits), and the hash that seeds their
// device-side random fills (splitmix64's finaliser: cheap, stateless, good enough to decorrelate inputs).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define BENCH_CHECK_CUDA(expr)                                                                  \
  do {                                                                                          \
    const cudaError_t e_ = (expr);                                                              \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

namespace glm5rt_bench {

__device__ inline uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

}  // namespace glm5rt_bench

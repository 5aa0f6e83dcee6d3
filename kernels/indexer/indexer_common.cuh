// Device helpers shared by the indexer kernels: the total order on scores and slot lookup.
#pragma once

#include "kernels/indexer/indexer_params.hpp"

#include <cstdint>

namespace glm5rt::kernels::indexer::detail {

// Order-preserving map of a float onto uint32 (larger float -> larger key). -0.0 is folded onto +0.0 so
// that the two zeros tie (relu(x) * negative weight yields -0.0, which must not rank below +0.0).
__host__ __device__ inline uint32_t order_key(float f) {
  uint32_t u;
#ifdef __CUDA_ARCH__
  u = __float_as_uint(f);
#else
  __builtin_memcpy(&u, &f, 4);
#endif
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__host__ __device__ inline float order_key_to_float(uint32_t key) {
  uint32_t u = (key & 0x80000000u) ? (key & 0x7fffffffu) : ~key;
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
#endif
}

// Composite key: all keys distinct, larger = better. Score first, then lower position first.
__host__ __device__ inline uint64_t rank_key(uint32_t score_key, uint32_t pos) {
  return (static_cast<uint64_t>(score_key) << 32) | static_cast<uint32_t>(~pos);
}

#ifdef __CUDACC__  // device code only: lets host C++ (tests/gpu/*.cpp) include the order helpers above
__device__ inline int32_t slot_of(const RowLayout& rows, int seq, int pos) {
  const int page = __ldg(rows.block_tables + static_cast<int64_t>(seq) * rows.block_table_stride + pos / rows.page_size);
  return page * rows.page_size + pos % rows.page_size;
}
#endif

}  // namespace glm5rt::kernels::indexer::detail

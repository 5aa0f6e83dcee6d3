// Internal: launch entry points of session 4's kernels (kernel_variant 8: the row-ring kernel,
// sparse_mla_ring_kernel.cuh, and the 32-token-step kernel, sparse_mla_big_kernel.cuh), kept apart from
// sparse_mla_launch.h so that only the launcher and their own translation units include them.
#pragma once

#include <cuda_runtime.h>

#include "kernels/attention/sparse_mla_big_kernel.cuh"
#include "kernels/attention/sparse_mla_ring_kernel.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

// bf16 records only; heads_per_cta in {8, 16, 32}; grid = T * nsplit * (H / heads_per_cta), as the others.
cudaError_t launch_big_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream);
cudaError_t launch_ring_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream);

inline int big_smem_bytes(int hc) {
  return hc == 8 ? BigCfg<8>::kSmemBytes : hc == 16 ? BigCfg<16>::kSmemBytes : BigCfg<32>::kSmemBytes;
}

inline int ring_smem_bytes(int hc) {
  return hc == 8 ? RingCfg<8>::kSmemBytes : hc == 16 ? RingCfg<16>::kSmemBytes : RingCfg<32>::kSmemBytes;
}

template <template <int> class Cfg, int HC>
cudaError_t launch_s4_one(void (*kernel)(KernelArgs), const KernelArgs& a, cudaStream_t stream) {
  using C = Cfg<HC>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmemBytes);
  if (err != cudaSuccess) return err;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
  if (err != cudaSuccess) return err;
  const int64_t blocks = static_cast<int64_t>(a.num_tokens) * a.nsplit * (a.num_heads / HC);
  if (blocks <= 0) return cudaSuccess;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  kernel<<<static_cast<unsigned>(blocks), C::kThreads, C::kSmemBytes, stream>>>(a);
  return cudaGetLastError();
}

template <int HC>
cudaError_t launch_big_one(const KernelArgs& a, cudaStream_t stream) {
  using C = BigCfg<HC>;
  auto kernel = sparse_mla_big_kernel<HC>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmemBytes);
  if (err != cudaSuccess) return err;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
  if (err != cudaSuccess) return err;
  const int64_t blocks = static_cast<int64_t>(a.num_tokens) * a.nsplit * (a.num_heads / HC);
  if (blocks <= 0) return cudaSuccess;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  kernel<<<static_cast<unsigned>(blocks), C::kThreads, C::kSmemBytes, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace glm5rt::kernels::sparse_mla_detail

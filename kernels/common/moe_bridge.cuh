// Adapters between the CUDA backend's float32 buffers (simple_forward.cuh) and the bf16 inputs / outputs
// of kernels/moe (moe_forward) and kernels/gemm (fp8_gemm): element-wise conversions and the split-K sum
// of fp8_gemm's bf16 partial results, graph-capturable,
// plain parameters, cudaError_t, no host synchronisation.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace glm5k {

// out[i] = float(in[i]) for n values.
cudaError_t launch_bf16_to_f32(const __nv_bfloat16* in, int64_t n, float* out, cudaStream_t stream);

// Split-K reduction: out[i] = sum over s < slices of float(in[s * n + i]) (in order s = 0, 1, ...), for
// n values; in holds `slices` bf16 partial results of n values each.
cudaError_t launch_sum_slices_bf16_to_f32(const __nv_bfloat16* in, int32_t slices, int64_t n, float* out,
                                          cudaStream_t stream);

// out[i] = bf16(in[i]) (round to nearest even) for n values.
cudaError_t launch_f32_to_bf16(const float* in, int64_t n, __nv_bfloat16* out, cudaStream_t stream);

}  // namespace glm5k

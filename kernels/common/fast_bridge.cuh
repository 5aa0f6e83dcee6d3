// Adapters between the CUDA backend's buffers (simple_forward.cuh) and the fast kernel families
// (kernels/attention sparse MLA, kernels/indexer): packing the absorbed query into the fast MLA's bf16
// [T, H, 576] layout, turning selected positions into physical cache slots, and converting the indexer
// query to the fast indexer's bf16 or e4m3 + per-(token, head) scale input. Same rules as the simple
// kernels: plain parameters, cudaError_t, no host synchronisation, graph-capturable.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/simple_forward.cuh"

namespace glm5k {

// out[r][h] = [q_lat[r][h][0..kv_lora) | q_rot[r][h][0..rope)] as bf16 (both inputs float32).
cudaError_t launch_pack_mla_query(const float* q_lat, const float* q_rot, int32_t rows, int32_t heads, int32_t kv_lora,
                                  int32_t rope, __nv_bfloat16* out, cudaStream_t stream);

// slots[r][i] = physical slot (page * page_size + offset) of position sel[r][i] in row r's sequence, or
// -1 where sel is negative (padding). Rows x k entries.
cudaError_t launch_positions_to_slots(const int32_t* sel, const BatchRows& batch, int32_t k, int32_t* slots,
                                      cudaStream_t stream);

// Indexer query [rows, heads, dim] float32 -> bf16 (fp8 false), or e4m3 with one float32 scale per
// (row, head): scale = amax / 448 (1 when the head is all zeros), value = e4m3(q / scale).
cudaError_t launch_indexer_query(const float* qi, int32_t rows, int32_t heads, int32_t dim, bool fp8, void* q_out,
                                 float* q_scale, cudaStream_t stream);

}  // namespace glm5k

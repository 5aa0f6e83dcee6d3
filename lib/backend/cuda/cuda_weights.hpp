// The model's weights in device memory, in the forms the CUDA forward reads: bf16 as stored, FP8
// block-scaled kept FP8 with its float32 scales, float32 checkpoints converted to bf16; norms and the
// MoE router in float32 (routing decisions are sensitive); kv_b split per head into the absorbed
// W_UK^T [H][kv_lora][nope] and W_UV [H][v_head][kv_lora] (bf16).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "kernels/common/simple_forward.cuh"
#include "model/config.hpp"
#include "model/weights.hpp"

namespace glm5rt::cuda {

// A [n, k] weight (nn.Linear layout). Groups (MoE experts) follow each other at group_stride elements.
struct DevLinear {
  const void* w = nullptr;
  int32_t dtype = glm5k::kWBf16;  // kWF32 / kWBf16 / kWFp8
  const float* scale = nullptr;   // FP8: [ceil(n / block_n), ceil(k / block_k)]
  int64_t n = 0, k = 0;
  int32_t block_n = 128, block_k = 128;
  int64_t group_stride = 0, scale_group_stride = 0;
  int64_t ld_scale() const { return (k + block_k - 1) / block_k; }
  bool empty() const { return w == nullptr; }
};

struct DevMlp {
  DevLinear gate, up, down;
};

struct DevLayer {
  const float *input_norm = nullptr, *post_norm = nullptr, *q_a_norm = nullptr, *kv_a_norm = nullptr;
  DevLinear q_a, q_b, kv_a, o_proj;
  const __nv_bfloat16 *w_uk_t = nullptr, *w_uv = nullptr;
  bool has_indexer = false;
  DevLinear idx_wq_b, idx_wk, idx_wp;
  const float *idx_k_norm_w = nullptr, *idx_k_norm_b = nullptr;
  bool is_moe = false;
  DevMlp dense;
  DevLinear router;  // float32 [E, hidden]
  const float* router_bias = nullptr;
  DevMlp experts;  // grouped: E groups
  bool has_shared = false;
  DevMlp shared;
};

struct DevWeights {
  const __nv_bfloat16* embed = nullptr;  // [vocab, hidden]
  const float* final_norm = nullptr;
  DevLinear lm_head;  // bf16
  std::vector<DevLayer> layers;
  std::vector<DeviceBuffer> owned;
  int64_t bytes = 0;
  int64_t max_fp8_dense = 0;  // elements of the largest non-grouped FP8 weight (dequantisation workspace)
};

// Uploads a checkpoint (shapes checked: Error(format) naming the tensor). progress may cancel.
DevWeights upload_weights(const ModelConfig& c, const ModelWeights& w, const std::function<bool(float)>& progress);

// A model of config c's dimensions with random weights made on the device: FP8 (128 x 128 blocks) for
// every projection and expert, bf16 embeddings / lm_head / indexer weights_proj / absorbed kv_b, float32
// norms and router. For benchmarks of shapes no checkpoint here has.
DevWeights random_weights(const ModelConfig& c, uint64_t seed);

}  // namespace glm5rt::cuda

// Views of the checkpoint's tensors, grouped per layer for the engine. The views point into the memory-
// mapped safetensors files (no copy); FP8 weights stay in their native e4m3 form with their block scales.
// Contract between lib/model (which fills them) and the backends (which read or upload them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace glm5rt {

enum class DType { f32, bf16, f16, fp8_e4m3, i32, i64 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);

struct TensorView {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // inside a mapped file; valid while the Checkpoint lives
  // FP8 block-scaled weights only: scale_inv is float32 [ceil(rows/block_rows), ceil(cols/block_cols)],
  // real weight = q[i][j] * scale_inv[i / block_rows][j / block_cols].
  const float* scale_inv = nullptr;
  int64_t block_rows = 0, block_cols = 0;

  bool empty() const { return data == nullptr; }
  int64_t numel() const;
  int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
  int64_t cols() const { return shape.size() < 2 ? 1 : shape[1]; }
};

// "[a, b]": a shape as error messages print it.
std::string shape_str(const std::vector<int64_t>& shape);
// Status::format ("tensor X is missing" / "tensor X has shape [..], expected [..]") unless t is present with exactly
// this shape: the backends' check of each tensor they take (the loader checked the checkpoint against config.json).
void require_shape(const TensorView& t, const std::vector<int64_t>& shape);

// Exact float32 decode of rows [row_begin, row_end) of a 1-D or 2-D tensor (bf16/f16/f32/FP8 with its
// scales) into out (row-major, (row_end - row_begin) * cols floats).
void decode_rows_f32(const TensorView& t, int64_t row_begin, int64_t row_end, float* out);
// The whole tensor decoded to float32.
std::vector<float> decode_f32(const TensorView& t);

struct MlpWeights {  // SwiGLU: down(silu(gate(x)) * up(x)); all [out, in]
  TensorView gate_proj, up_proj, down_proj;
};

struct LayerWeights {
  TensorView input_layernorm, post_attention_layernorm;
  // MLA
  TensorView q_a_proj, q_a_layernorm, q_b_proj;
  TensorView kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj;
  TensorView o_proj;
  // lightning indexer
  TensorView idx_wq_b, idx_wk, idx_k_norm_weight, idx_k_norm_bias, idx_weights_proj;
  // MLP: dense layers use `dense`; MoE layers use router + experts + shared
  bool is_moe = false;
  MlpWeights dense;
  TensorView router_weight;  // mlp.gate.weight [n_routed_experts, hidden]
  TensorView router_bias;    // mlp.gate.e_score_correction_bias [n_routed_experts]
  std::vector<MlpWeights> experts;
  MlpWeights shared_expert;
};

struct ModelWeights {
  TensorView embed_tokens, final_norm, lm_head;
  std::vector<LayerWeights> layers;  // num_hidden_layers decoder layers (MTP layers not included)
};

}  // namespace glm5rt

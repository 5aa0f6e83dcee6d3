// The validated model configuration of a glm_moe_dsa checkpoint (config.json), see docs/GLM5.md.
// Contract between lib/model (which parses and validates it) and everything above (engine, backends).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace glm5rt {

enum class RopeType { default_, yarn };

struct RopeParameters {
  RopeType type = RopeType::default_;
  double theta = 10000.0;
  // yarn only (transformers 5.17 _compute_yarn_parameters semantics, docs/GLM5.md step 4)
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;          // 0 = absent
  double mscale_all_dim = 0.0;  // 0 = absent
  bool truncate = true;
  double attention_factor = 0.0;  // 0 = absent (derived)
};

enum class IndexerType { full, shared };
enum class MlpType { dense, moe };

struct QuantizationConfig {
  bool fp8 = false;           // quant_method "fp8", fmt "e4m3"
  int64_t block_rows = 128;   // weight_block_size[0]: output-dimension block
  int64_t block_cols = 128;   // weight_block_size[1]: input-dimension block
};

struct ModelConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t intermediate_size = 0;       // dense MLP
  int64_t moe_intermediate_size = 0;
  int64_t n_routed_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t n_shared_experts = 0;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  bool norm_topk_prob = true;

  int64_t num_attention_heads = 0;
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }

  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;

  double rms_norm_eps = 1e-5;
  RopeParameters rope;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  int64_t num_nextn_predict_layers = 0;  // MTP layers stored after the decoder layers

  std::vector<IndexerType> indexer_types;  // one per decoder layer
  std::vector<MlpType> mlp_types;          // one per decoder layer
  std::vector<int32_t> eos_token_ids;      // config.json, merged with generation_config.json
  QuantizationConfig quant;

  std::string torch_dtype;  // "bfloat16", "float32", ... as written (informational)
};

// Parses and validates config.json text (and, when not empty, generation_config.json text for extra eos
// ids). Throws glm5rt::Error(Status::format) with a message naming the field on anything invalid.
ModelConfig parse_model_config(const std::string& config_json, const std::string& generation_config_json = "");

}  // namespace glm5rt

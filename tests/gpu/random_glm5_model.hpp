// A small random model with GLM-5's attention shapes (kv_lora 512, rope 64, 16 heads, indexer 32 heads x
// 128 dims), for the GPU tests that compare the CUDA backend's fast paths with the CPU backend
// (test_cuda_fast_kernels.cpp: float32 weights; test_cuda_fast_moe.cpp: FP8 block-scaled projections).
// The fixtures are too small for the fast kernel families, so these tests build their own model: hidden
// 256, 3 layers (dense + full indexer, MoE + full indexer, MoE + shared indexer); the MoE sizes and the
// projections' format are the caller's. Weights live in host memory owned by the model.
#pragma once

#include <cuda_fp8.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/weights.hpp"
#include "tests/gpu/backend_agreement.hpp"

namespace glm5rt_test {

struct RandomGlm5Model {
  ModelConfig c;
  ModelWeights w;
  std::vector<std::unique_ptr<std::vector<float>>> floats;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> bytes;
  std::mt19937_64 rng;
  bool fp8_projections = false;  // projections and experts as FP8 e4m3 with 128 x 128 block scales

  explicit RandomGlm5Model(uint64_t seed) : rng(seed) {}

  // bf16-exact float32 values center + spread * U(-1, 1).
  TensorView f32(const std::string& name, std::vector<int64_t> shape, float center, float spread) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    auto v = std::make_unique<std::vector<float>>(static_cast<size_t>(n));
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (auto& x : *v) x = bf16_representable(center + spread * u(rng));
    TensorView t;
    t.name = name;
    t.dtype = DType::f32;
    t.shape = std::move(shape);
    t.data = v->data();
    floats.push_back(std::move(v));
    return t;
  }
  // [out, in] FP8: e4m3 values uniform in +-448 times block scales s * U(0.5, 1.5), s = sqrt(3 / in) / 448
  // (about unit-variance outputs for unit-variance inputs).
  TensorView fp8(const std::string& name, int64_t out, int64_t in) {
    auto q = std::make_unique<std::vector<uint8_t>>(static_cast<size_t>(out * in));
    std::uniform_real_distribution<float> u(-448.f, 448.f), su(0.5f, 1.5f);
    for (auto& b : *q) b = static_cast<uint8_t>(__nv_cvt_float_to_fp8(u(rng), __NV_SATFINITE, __NV_E4M3));
    const int64_t br = (out + 127) / 128, bc = (in + 127) / 128;
    auto s = std::make_unique<std::vector<float>>(static_cast<size_t>(br * bc));
    const float base = std::sqrt(3.f / static_cast<float>(in)) / 448.f;
    for (auto& x : *s) x = base * su(rng);
    TensorView t;
    t.name = name;
    t.dtype = DType::fp8_e4m3;
    t.shape = {out, in};
    t.data = q->data();
    t.scale_inv = s->data();
    t.block_rows = 128;
    t.block_cols = 128;
    bytes.push_back(std::move(q));
    floats.push_back(std::move(s));
    return t;
  }
  // [out, in] float32 with entries ~ U(-1, 1) * sqrt(3 / in): unit-variance outputs for unit-variance inputs.
  TensorView dense(const std::string& name, int64_t out, int64_t in) {
    return f32(name, {out, in}, 0.f, std::sqrt(3.f / static_cast<float>(in)));
  }
  // A projection or expert matrix in the model's projection format.
  TensorView linear(const std::string& name, int64_t out, int64_t in) {
    return fp8_projections ? fp8(name, out, in) : dense(name, out, in);
  }
  TensorView norm(const std::string& name, int64_t n) { return f32(name, {n}, 1.f, 0.2f); }
  MlpWeights mlp(const std::string& p, int64_t d, int64_t i) {
    return {linear(p + ".gate_proj", i, d), linear(p + ".up_proj", i, d), linear(p + ".down_proj", d, i)};
  }
};

// The configuration shared by both tests; the caller then sets the MoE sizes, q_lora_rank and the dtype.
inline void set_glm5_attention_config(ModelConfig& c) {
  c.vocab_size = 512;
  c.hidden_size = 256;
  c.num_hidden_layers = 3;
  c.intermediate_size = 384;
  c.n_shared_experts = 1;
  c.routed_scaling_factor = 2.5;
  c.norm_topk_prob = true;
  c.num_attention_heads = 16;
  c.kv_lora_rank = 512;
  c.qk_nope_head_dim = 64;
  c.qk_rope_head_dim = 64;
  c.v_head_dim = 64;
  c.index_n_heads = 32;
  c.index_head_dim = 128;
  c.index_topk = 64;
  c.rms_norm_eps = 1e-5;
  c.rope.theta = 10000.0;
  c.max_position_embeddings = 4096;
  c.indexer_types = {IndexerType::full, IndexerType::full, IndexerType::shared};
  c.mlp_types = {MlpType::dense, MlpType::moe, MlpType::moe};
}

// Draws every weight of m.c's model (embeddings, norms, router, indexer's weights_proj and lm_head in
// float32; projections and experts in m's projection format).
inline void draw_random_weights(RandomGlm5Model& m) {
  const ModelConfig& c = m.c;
  const int64_t D = c.hidden_size, H = c.num_attention_heads;
  ModelWeights& w = m.w;
  w.embed_tokens = m.f32("embed_tokens", {c.vocab_size, D}, 0.f, 1.f);
  w.final_norm = m.norm("norm", D);
  w.lm_head = m.dense("lm_head", c.vocab_size, D);
  for (int64_t li = 0; li < c.num_hidden_layers; ++li) {
    const std::string p = "layers." + std::to_string(li) + ".";
    LayerWeights L;
    L.input_layernorm = m.norm(p + "input_layernorm", D);
    L.post_attention_layernorm = m.norm(p + "post_attention_layernorm", D);
    L.q_a_proj = m.linear(p + "q_a_proj", c.q_lora_rank, D);
    L.q_a_layernorm = m.norm(p + "q_a_layernorm", c.q_lora_rank);
    L.q_b_proj = m.linear(p + "q_b_proj", H * c.qk_head_dim(), c.q_lora_rank);
    L.kv_a_proj_with_mqa = m.linear(p + "kv_a_proj_with_mqa", c.kv_lora_rank + c.qk_rope_head_dim, D);
    L.kv_a_layernorm = m.norm(p + "kv_a_layernorm", c.kv_lora_rank);
    L.kv_b_proj = m.linear(p + "kv_b_proj", H * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
    L.o_proj = m.linear(p + "o_proj", D, H * c.v_head_dim);
    if (c.indexer_types[li] == IndexerType::full) {
      L.idx_wq_b = m.linear(p + "indexer.wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank);
      L.idx_wk = m.linear(p + "indexer.wk", c.index_head_dim, D);
      L.idx_k_norm_weight = m.norm(p + "indexer.k_norm.weight", c.index_head_dim);
      L.idx_k_norm_bias = m.f32(p + "indexer.k_norm.bias", {c.index_head_dim}, 0.f, 0.1f);
      L.idx_weights_proj = m.dense(p + "indexer.weights_proj", c.index_n_heads, D);
    }
    L.is_moe = c.mlp_types[li] == MlpType::moe;
    if (!L.is_moe) {
      L.dense = m.mlp(p + "mlp", D, c.intermediate_size);
    } else {
      L.router_weight = m.dense(p + "mlp.gate", c.n_routed_experts, D);
      L.router_bias = m.f32(p + "mlp.gate.e_score_correction_bias", {c.n_routed_experts}, 0.f, 0.05f);
      for (int64_t e = 0; e < c.n_routed_experts; ++e)
        L.experts.push_back(m.mlp(p + "mlp.experts." + std::to_string(e), D, c.moe_intermediate_size));
      L.shared_expert = m.mlp(p + "mlp.shared_experts", D, c.moe_intermediate_size * c.n_shared_experts);
    }
    w.layers.push_back(std::move(L));
  }
}

}  // namespace glm5rt_test

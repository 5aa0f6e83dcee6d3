// The checkpoint's weights decoded once to float32 (exact decode of bf16 / f16 / FP8-with-scales by the
// loader's decode_rows_f32), in the layouts the CPU forward reads.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/config.hpp"
#include "model/weights.hpp"
#include "runtime/host_memory.hpp"

namespace glm5rt::cpu {

using Tensor = std::vector<float, HostAllocator<float>>;  // 64-byte aligned, from mimalloc

struct CpuMlp {
  Tensor gate, up, down;  // [inter, hidden], [inter, hidden], [hidden, inter]
  int64_t inter = 0;
};

struct CpuLayer {
  Tensor input_norm, post_attn_norm;
  Tensor q_a, q_a_norm, q_b;     // [q_lora, hidden], [q_lora], [H * qk_head_dim, q_lora]
  Tensor kv_a, kv_a_norm;        // [kv_lora + rope, hidden], [kv_lora]
  Tensor w_uk_t;                 // [H][kv_lora][qk_nope]: kv_b's key rows per head, transposed (absorbed query)
  Tensor w_uv;                   // [H][v_head][kv_lora]: kv_b's value rows per head
  Tensor o_proj;                 // [hidden, H * v_head]
  Tensor idx_wq_b, idx_wk, idx_k_norm_w, idx_k_norm_b, idx_weights_proj;
  bool is_moe = false;
  CpuMlp dense;
  Tensor router, router_bias;    // [E, hidden], [E]
  std::vector<CpuMlp> experts;
  CpuMlp shared;
};

struct CpuWeights {
  Tensor embed;       // [vocab, hidden]
  Tensor final_norm;  // [hidden]
  Tensor lm_head;     // [vocab, hidden]
  std::vector<CpuLayer> layers;
  int64_t bytes() const;
};

// Decodes and validates shapes (Error(format) naming the tensor on a mismatch). progress(fraction) may
// return false to cancel (Error(cancelled)).
CpuWeights decode_weights(const ModelConfig& c, const ModelWeights& w, const std::function<bool(float)>& progress);

}  // namespace glm5rt::cpu

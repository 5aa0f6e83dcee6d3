// libFuzzer target: whole-checkpoint validation (Checkpoint::open) on an arbitrary model.safetensors next to
// a fixed, small, valid config.json (2 layers: dense + MoE with 4 experts, FP8 blocks [4, 4]). Exercises
// the tensor table, FP8 scale pairing and checks, expected-tensor shapes, per-layer views and totals; an
// accepted checkpoint must decode every view it hands out. Build and run: scripts/fuzz.sh.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "model/checkpoint.hpp"
#include "runtime/error.hpp"
#include "runtime/log.hpp"

namespace {

// Keep in sync with fuzz/make_corpus.py (which writes the matching seed checkpoint).
const char* kConfig = R"({"model_type": "glm_moe_dsa", "vocab_size": 16, "hidden_size": 8, "num_hidden_layers": 2,
  "intermediate_size": 12, "moe_intermediate_size": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
  "n_shared_experts": 1, "n_group": 2, "topk_group": 1, "num_attention_heads": 2, "q_lora_rank": 6,
  "kv_lora_rank": 4, "qk_nope_head_dim": 2, "qk_rope_head_dim": 2, "v_head_dim": 3, "index_n_heads": 2,
  "index_head_dim": 4, "index_topk": 4, "max_position_embeddings": 64, "first_k_dense_replace": 1,
  "indexer_types": ["full", "shared"], "eos_token_id": 1,
  "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [4, 4]}})";

std::string g_dir;

void write(const std::string& path, const void* data, size_t n) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();
  if (n && std::fwrite(data, 1, n, f) != n) __builtin_trap();
  std::fclose(f);
}

void check_decodes(const glm5rt::TensorView& v) {
  if (v.empty()) return;
  if (v.shape.size() > 2) __builtin_trap();
  volatile float sink = 0;
  for (float x : glm5rt::decode_f32(v)) sink = sink + x;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  glm5rt::set_log_level(GLM5RT_LOG_ERROR);
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/glm5rt-fuzz-ckpt-XXXXXX";
  if (!::mkdtemp(tmpl.data())) __builtin_trap();
  g_dir = tmpl;
  write(g_dir + "/config.json", kConfig, std::string(kConfig).size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  write(g_dir + "/model.safetensors", data, size);
  try {
    auto ck = glm5rt::Checkpoint::open(g_dir);
    const auto& w = ck->weights();
    if (w.layers.size() != 2) __builtin_trap();
    check_decodes(w.embed_tokens);
    check_decodes(w.lm_head);
    check_decodes(w.final_norm);
    for (const auto& L : w.layers) {
      for (const auto* v : {&L.input_layernorm, &L.post_attention_layernorm, &L.q_a_proj, &L.q_a_layernorm,
                            &L.q_b_proj, &L.kv_a_proj_with_mqa, &L.kv_a_layernorm, &L.kv_b_proj, &L.o_proj,
                            &L.idx_wq_b, &L.idx_wk, &L.idx_k_norm_weight, &L.idx_k_norm_bias, &L.idx_weights_proj,
                            &L.router_weight, &L.router_bias, &L.dense.gate_proj, &L.dense.up_proj,
                            &L.dense.down_proj, &L.shared_expert.gate_proj, &L.shared_expert.up_proj,
                            &L.shared_expert.down_proj})
        check_decodes(*v);
      for (const auto& e : L.experts) {
        check_decodes(e.gate_proj);
        check_decodes(e.up_proj);
        check_decodes(e.down_proj);
      }
    }
    if (ck->n_params() < 0 || ck->weight_bytes() < 0) __builtin_trap();
  } catch (const glm5rt::Error&) {
  }
  return 0;
}

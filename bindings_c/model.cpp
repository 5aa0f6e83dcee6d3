// C ABI: model loading, info, free. Handles own a shared_ptr<Model>; sessions and tokenizers share it.
#include <algorithm>
#include <cstring>

#include "bindings_c/handles.hpp"
#include "bindings_c/shim.hpp"
#include "engine/model.hpp"

using glm5rt::fail;
using glm5rt::require;
using glm5rt::Status;

namespace {

int32_t abi_dtype(glm5rt::DType t) {
  switch (t) {
    case glm5rt::DType::f32: return GLM5RT_DTYPE_F32;
    case glm5rt::DType::bf16: return GLM5RT_DTYPE_BF16;
    case glm5rt::DType::f16: return GLM5RT_DTYPE_F16;
    case glm5rt::DType::fp8_e4m3: return GLM5RT_DTYPE_FP8_E4M3;
    default: fail(Status::internal, "projection weights of an integer dtype passed validation");
  }
}

}  // namespace

extern "C" {

GLM5RT_API glm5rt_status glm5rt_model_load(const char* dir, const glm5rt_model_params* params, glm5rt_model** out_model) {
  return glm5rt::abi::guard(__func__, [&] {
    glm5rt::abi::require_arg(dir, "dir");
    glm5rt::abi::require_arg(out_model, "out_model");
    const glm5rt_model_params p = glm5rt::abi::read_params(params, glm5rt_model_default_params, "params");
    glm5rt::ModelOptions opt;
    opt.backend = p.backend;
    opt.device_index = p.device_index;
    opt.n_threads = p.n_threads;
    if (p.progress) {
      const glm5rt_progress_fn fn = p.progress;
      void* user = p.progress_user_data;
      opt.progress = [fn, user](float f) { return fn(f, user) != 0; };
    }
    // Everything is owned by RAII objects until the last line: an error leaves nothing behind and
    // *out_model untouched.
    auto model = glm5rt::Model::load(dir, opt);
    auto handle = std::make_unique<glm5rt_model>();
    handle->impl = std::move(model);
    *out_model = handle.release();
  });
}

GLM5RT_API void glm5rt_model_free(glm5rt_model* model) { delete model; }

GLM5RT_API glm5rt_status glm5rt_model_get_info(const glm5rt_model* model, glm5rt_model_info* info) {
  return glm5rt::abi::guard(__func__, [&] {
    glm5rt::abi::require_arg(model, "model");
    glm5rt::abi::require_arg(info, "info");
    const uint32_t size = info->struct_size;
    require(size >= sizeof(uint32_t), Status::invalid_argument, "info->struct_size is ", size,
            ": set it to sizeof(glm5rt_model_info)");
    const glm5rt::Model& m = *model->impl;
    const glm5rt::ModelConfig& c = m.config();
    const glm5rt::Checkpoint& ck = m.checkpoint();

    glm5rt_model_info full;
    std::memset(&full, 0, sizeof full);
    full.struct_size = size;  // the caller's size stays as it was
    full.n_layers = static_cast<int32_t>(c.num_hidden_layers);
    full.n_vocab = static_cast<int32_t>(c.vocab_size);
    full.hidden_size = static_cast<int32_t>(c.hidden_size);
    full.n_heads = static_cast<int32_t>(c.num_attention_heads);
    full.n_routed_experts = static_cast<int32_t>(c.n_routed_experts);
    full.n_experts_per_token = static_cast<int32_t>(c.num_experts_per_tok);
    full.n_dense_layers =
        static_cast<int32_t>(std::count(c.mlp_types.begin(), c.mlp_types.end(), glm5rt::MlpType::dense));
    full.kv_lora_rank = static_cast<int32_t>(c.kv_lora_rank);
    full.qk_rope_head_dim = static_cast<int32_t>(c.qk_rope_head_dim);
    full.index_topk = static_cast<int32_t>(std::min<int64_t>(c.index_topk, INT32_MAX));
    full.weight_dtype = abi_dtype(ck.weight_dtype());
    full.backend = m.backend_kind();
    full.context_length = c.max_position_embeddings;
    full.n_params = ck.n_params();
    full.weight_bytes = ck.weight_bytes();
    const size_t n_eos = std::min<size_t>(c.eos_token_ids.size(), 8);
    full.n_eos = static_cast<int32_t>(n_eos);
    for (size_t i = 0; i < n_eos; ++i) full.eos_ids[i] = c.eos_token_ids[i];
    // An older caller's struct is shorter: write only the bytes it knows.
    std::memcpy(info, &full, std::min<size_t>(size, sizeof full));
  });
}

}  // extern "C"

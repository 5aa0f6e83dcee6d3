/* Prints the size and field offsets of the ABI's structs as the C compiler lays them out, in the
 * format of examples/rust/glm5rt-sys/examples/layout.rs: the Rust bindings are written by hand, and
 * run.sh compares the two outputs line by line. */
#include <glm5rt/glm5rt.h>

#include <stddef.h>
#include <stdio.h>

#define SIZE(t) printf("%s %zu\n", #t, sizeof(t))
#define OFF(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(t, f))

int main(void) {
    SIZE(glm5rt_model_params);
    OFF(glm5rt_model_params, struct_size); OFF(glm5rt_model_params, backend);
    OFF(glm5rt_model_params, device_index); OFF(glm5rt_model_params, n_threads);
    OFF(glm5rt_model_params, progress); OFF(glm5rt_model_params, progress_user_data);
    SIZE(glm5rt_model_info);
    OFF(glm5rt_model_info, struct_size); OFF(glm5rt_model_info, n_layers); OFF(glm5rt_model_info, n_vocab);
    OFF(glm5rt_model_info, hidden_size); OFF(glm5rt_model_info, n_heads);
    OFF(glm5rt_model_info, n_routed_experts); OFF(glm5rt_model_info, n_experts_per_token);
    OFF(glm5rt_model_info, n_dense_layers); OFF(glm5rt_model_info, kv_lora_rank);
    OFF(glm5rt_model_info, qk_rope_head_dim); OFF(glm5rt_model_info, index_topk);
    OFF(glm5rt_model_info, weight_dtype); OFF(glm5rt_model_info, backend);
    OFF(glm5rt_model_info, context_length); OFF(glm5rt_model_info, n_params);
    OFF(glm5rt_model_info, weight_bytes); OFF(glm5rt_model_info, n_eos); OFF(glm5rt_model_info, eos_ids);
    SIZE(glm5rt_chat_message);
    OFF(glm5rt_chat_message, role); OFF(glm5rt_chat_message, content);
    OFF(glm5rt_chat_message, reasoning); OFF(glm5rt_chat_message, tool_calls_json);
    SIZE(glm5rt_session_params);
    OFF(glm5rt_session_params, struct_size); OFF(glm5rt_session_params, max_tokens);
    OFF(glm5rt_session_params, cache_bytes); OFF(glm5rt_session_params, page_size);
    OFF(glm5rt_session_params, cache_dtype); OFF(glm5rt_session_params, index_cache_dtype);
    OFF(glm5rt_session_params, prefill_chunk); OFF(glm5rt_session_params, seed);
    SIZE(glm5rt_sampler_params);
    OFF(glm5rt_sampler_params, struct_size); OFF(glm5rt_sampler_params, temperature);
    OFF(glm5rt_sampler_params, top_k); OFF(glm5rt_sampler_params, top_p); OFF(glm5rt_sampler_params, min_p);
    OFF(glm5rt_sampler_params, repetition_penalty); OFF(glm5rt_sampler_params, penalty_last_n);
    return 0;
}

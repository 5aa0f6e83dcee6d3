//! Prints the size and field offsets of every struct of the hand-written bindings, one `name value`
//! per line. tests/consumers/layout.c prints the same lines from the C header; the two must be equal.
use glm5rt_sys::*;
use std::mem::{size_of, MaybeUninit};
use std::ptr::addr_of;

// Field offsets through raw pointers into an uninitialised value (std's offset_of! needs Rust 1.77;
// Debian 12 ships 1.63).
macro_rules! layout {
    ($t:ident { $($f:ident),* }) => {
        println!("{} {}", stringify!($t), size_of::<$t>());
        let v = MaybeUninit::<$t>::uninit();
        let base = v.as_ptr();
        // SAFETY: addr_of! computes field addresses without reading the uninitialised memory.
        $(println!("{}.{} {}", stringify!($t), stringify!($f),
                   unsafe { addr_of!((*base).$f) } as usize - base as usize);)*
    };
}

fn main() {
    layout!(glm5rt_model_params {
        struct_size,
        backend,
        device_index,
        n_threads,
        progress,
        progress_user_data
    });
    layout!(glm5rt_model_info {
        struct_size,
        n_layers,
        n_vocab,
        hidden_size,
        n_heads,
        n_routed_experts,
        n_experts_per_token,
        n_dense_layers,
        kv_lora_rank,
        qk_rope_head_dim,
        index_topk,
        weight_dtype,
        backend,
        context_length,
        n_params,
        weight_bytes,
        n_eos,
        eos_ids
    });
    layout!(glm5rt_chat_message {
        role,
        content,
        reasoning,
        tool_calls_json
    });
    layout!(glm5rt_session_params {
        struct_size,
        max_tokens,
        cache_bytes,
        page_size,
        cache_dtype,
        index_cache_dtype,
        prefill_chunk,
        seed
    });
    layout!(glm5rt_sampler_params {
        struct_size,
        temperature,
        top_k,
        top_p,
        min_p,
        repetition_penalty,
        penalty_last_n
    });
}
